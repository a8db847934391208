"""The attack suite at the app's door, in Chromium, in both sign-in modes (OpenID Connect with a real
provider on loopback, and a reverse proxy's identity headers): ads's user (bob) tries every way into
payments' query (tests/tenants.py) by deep link on every page: links below their root, links given
as the path, a link to a missing place, ``..``, ``file://``, a look-alike root, a linked event log,
a listing through a linked folder, SQL escapes, logs crafted to name payments' files; payments' own
user is refused the job page by URL; a download is fetched by another user and by nobody; the job
page runs only what the policy names. Each attempt is refused on the page and in the audit log, and
payments' marked values and query id are searched for in every page's HTML and every download. The Pipeline
page's root, data root and a root of links out are refused the same way."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

import signin
from conftest import idle
from signin import audit_lines, link, written
from support import ARTIFACTS
from tenants import MARK, Teams, build

pytestmark = pytest.mark.jvm  # payments' query runs for real

USERS = {
    "alice": {"sub": "alice", "email": "alice@example.com", "groups": ["payments"]},
    "bob": {"sub": "bob", "email": "bob@example.com", "groups": ["ads"]},
}


@dataclass(frozen=True)
class Server:
    url: str
    audit: Path
    mode: str


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Teams:
    return build(tmp_path_factory.getbasetemp().parent / "tenants")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of jobs ads's policy lets them run."""
    folder = tmp_path_factory.mktemp("jobs")
    (folder / "orders_v2.py").write_text("print('the changed job')\n")
    return folder


@pytest.fixture(scope="module", params=["oidc", "proxy"])
def server(
    request: pytest.FixtureRequest, teams: Teams, jobs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    mode = request.param
    folder = tmp_path_factory.mktemp(f"attacks-{mode}")
    audit = folder / "audit.jsonl"
    if mode == "oidc":
        provider = signin.provider(tmp_path_factory.mktemp("oidc"), USERS)
        secrets = signin.oidc_secrets(next(provider))
    else:
        provider, secrets = None, None
    for url in signin.serve(folder, teams.policy(mode, audit, jobs), secrets, f"attacks-{mode}"):
        yield Server(url, audit, mode)
    if provider is not None:
        next(provider, None)  # stop it


def user(browser: Any, server: Server, name: str) -> tuple[Any, Any]:
    """A browser context and page signed in as ``name``."""
    email, groups = str(USERS[name]["email"]), list(USERS[name]["groups"])
    if server.mode == "oidc":
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True)
        page = ctx.new_page()
        signin.sign_in(page, server.url, name, email)
    else:
        headers = {"X-Forwarded-Email": email, "X-Forwarded-Groups": ",".join(groups)}
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True, extra_http_headers=headers)
        page = ctx.new_page()
    return ctx, page


def clean(teams: Teams, page: Any, what: str) -> str:
    """The page's HTML, once none of payments' values is in it."""
    idle(page)
    html = str(page.content())
    assert not teams.leaked(html), f"{what}: {teams.leaked(html)}"
    return html


def attempts(t: Teams) -> list[tuple[str, str, dict[str, str], str]]:
    """(name, page, link parameters, the refusal's title) of each way in by deep link."""
    return [
        ("a folder of links", "", {"checkpoint": str(t.mirror)}, "Link not followed"),
        ("linked partitions, state browser", "browser", {"checkpoint": str(t.halfcopy)}, "Link not followed"),
        ("linked partitions, SQL", "sql", {"checkpoint": str(t.halfcopy), "sql": "SELECT * FROM op0"}, "Link not followed"),
        ("linked partitions, health", "health", {"checkpoint": str(t.halfcopy)}, "Link not followed"),
        ("linked partitions, operators", "operators", {"checkpoint": str(t.halfcopy)}, "Link not followed"),
        ("a link as the path", "", {"checkpoint": str(t.escape)}, "Checkpoint not allowed"),
        ("a link to a missing place", "", {"checkpoint": str(t.dangling)}, "Checkpoint not allowed"),
        ("file://", "why_missing", {"checkpoint": f"file://{t.orders}", "key": "cust-1"}, "Checkpoint not allowed"),
        ("..", "sql", {"checkpoint": f"{t.ads}/../payments/orders", "sql": "SELECT 1"}, "Checkpoint not allowed"),
        ("a look-alike root", "health", {"checkpoint": str(t.lookalike)}, "Checkpoint not allowed"),
        ("a linked event log", "", {"checkpoint": str(t.clicks), "event_log": str(t.logs)}, "Link not followed"),
        ("listing /", "checkpoints", {"prefix": "/"}, "Folder not allowed"),
        (
            "SQL reading payments' sink",
            "sql",
            {"checkpoint": str(t.clicks), "sql": f"SELECT * FROM read_parquet('{t.pay / 'sink'}/*.parquet')"},
            "SQL not allowed",
        ),
        (
            "SQL writing a file",
            "sql",
            {"checkpoint": str(t.clicks), "sql": f"COPY (SELECT 1) TO '{t.ads}/x.csv'"},
            "SQL not allowed",
        ),
        ("SQL listing files", "sql", {"checkpoint": str(t.clicks), "sql": f"SELECT * FROM glob('{t.pay}/*')"}, "SQL not allowed"),
    ]


def test_every_way_in_by_deep_link_is_refused_and_audited(server: Server, browser: Any, teams: Teams) -> None:
    ctx, page = user(browser, server, "bob")
    try:
        for name, page_path, params, title in attempts(teams):
            page.goto(link(server.url, page_path, **params))
            expect(page.get_by_text(title).first).to_be_visible(timeout=120_000)
            clean(teams, page, name)
            written(server.audit, lambda x, p=params: x.get("event") == "question" and x.get("allowed") is False
                    and (x.get("checkpoint") == p.get("checkpoint") or p.get("prefix") is not None))  # fmt: skip
        # what bob may read answers, without a link followed out of his root
        page.goto(link(server.url, "checkpoints", prefix=str(teams.ads)))
        expect(page.get_by_text("Skipped").first).to_be_visible(timeout=120_000)
        expect(page.get_by_text(f"{teams.team}").first).to_be_visible()
        clean(teams, page, "listing ads's root")
        # the Pipeline page's root and data root, and a root whose folders are links into payments'
        for name, params, title in (
            ("payments' root as the pipeline's", {"root": str(teams.pay)}, "Folder not allowed"),
            ("payments' tables as the data root", {"root": str(teams.clicks), "data_root": str(teams.pay)}, "Folder not allowed"),
            ("a pipeline root through a link", {"root": str(teams.escape)}, "Folder not allowed"),
        ):
            page.goto(link(server.url, "pipeline", **params))
            expect(page.get_by_text(title).first).to_be_visible(timeout=120_000)
            expect(page.get_by_role("textbox", name="Root")).to_have_value(params["root"])  # the link's, shown
            clean(teams, page, name)
            written(server.audit, lambda x, p=params: x.get("event") == "question" and x.get("allowed") is False
                    and x.get("paths", {}).get("root") == p["root"])  # fmt: skip
        page.goto(link(server.url, "pipeline", root=str(teams.mirror)))  # links into payments' checkpoint: not followed
        expect(page.get_by_text("Link not followed").first).to_be_visible(timeout=120_000)
        expect(page.get_by_role("textbox", name="Root")).to_have_value(str(teams.mirror))
        clean(teams, page, "a pipeline root of links")
        written(server.audit, lambda x: x.get("allowed") is False and x.get("paths", {}).get("root") == str(teams.mirror))
        page.screenshot(path=str(ARTIFACTS / f"attacks-pipeline-links-{server.mode}.png"), full_page=True)
        page.goto(link(server.url, "why_missing", checkpoint=str(teams.crafted), key="ad-0-1"))
        expect(page.get_by_text("outside the folders that may be opened").first).to_be_visible(timeout=180_000)
        clean(teams, page, "a crafted log naming payments' input")
        page.screenshot(path=str(ARTIFACTS / f"attacks-{server.mode}.png"), full_page=True)
    finally:
        ctx.close()
    lines = [x for x in audit_lines(server.audit) if x.get("user") == "bob@example.com"]
    refused = [x for x in lines if x.get("event") == "question" and not x["allowed"]]
    titles = " ".join(r for x in refused for r in x["refused"])
    for needle in (
        "is a link to a place outside",
        "not among the checkpoints",
        "not among the folders",
        "State Lens SQL reads only",
    ):
        assert needle in titles, needle
    listing = [x for x in lines if x.get("page") == "checkpoints" and x.get("paths", {}).get("prefix") == str(teams.ads)]
    assert listing and any("it was skipped" in r for r in listing[-1]["refused"])


def test_a_download_is_served_only_to_the_user_who_made_it(server: Server, browser: Any, teams: Teams) -> None:
    alice, page = user(browser, server, "alice")
    bob, bob_page = user(browser, server, "bob")
    try:
        page.goto(link(server.url, "sql", checkpoint=str(teams.orders), sql="SELECT key.customer AS c FROM op0 ORDER BY 1"))
        expect(page.get_by_text(re.compile(r"^3 rows · \d+ ms$"))).to_be_visible(timeout=180_000)
        idle(page)
        with page.expect_download(timeout=60_000) as dl:
            page.get_by_role("button", name="CSV", exact=True).click()
        # fetched again as the signed-in user (a proxy adds its headers to every request; Playwright's
        # stand-in for it does not reach the browser's own download of the address)
        address = dl.value.url
        mine = alice.request.get(address)
        assert mine.status == 200 and MARK in mine.text()
        got = bob.request.get(address)
        assert got.status == 403 and not teams.leaked(got.text())
        anonymous = browser.new_context()
        try:
            nobody = anonymous.request.get(address)
            assert nobody.status == 401 and not teams.leaked(nobody.text())
        finally:
            anonymous.close()
        # bob's own downloads are his
        bob_page.goto(link(server.url, "sql", checkpoint=str(teams.clicks), sql="SELECT count(*) AS n FROM op0_left"))
        expect(bob_page.get_by_text(re.compile(r"^1 rows · \d+ ms$"))).to_be_visible(timeout=180_000)
        idle(bob_page)
        with bob_page.expect_download(timeout=60_000) as his:
            bob_page.get_by_role("button", name="CSV", exact=True).click()
        got = bob.request.get(his.value.url)
        assert got.status == 200 and got.text().splitlines()[0] == '"n"' and not teams.leaked(got.text())
    finally:
        alice.close()
        bob.close()
    refusals = [x for x in audit_lines(server.audit) if x.get("event") == "download refused"]
    assert {(x["user"], x["reason"]) for x in refusals} >= {("bob@example.com", "made for another user"), (None, "no identity")}


def test_hidden_pages_and_jobs_go_only_as_the_policy_says(server: Server, browser: Any, teams: Teams, jobs: Path) -> None:
    alice, page = user(browser, server, "alice")  # payments may run no job: the page is hidden
    try:
        page.goto(link(server.url, "preflight", checkpoint=str(teams.orders)))
        expect(page.get_by_text("Page not available").first).to_be_visible(timeout=60_000)
        assert page.get_by_text("The changed job's script").count() == 0
    finally:
        alice.close()
    written(server.audit, lambda x: x.get("user") == "alice@example.com" and x.get("page") == "preflight" and not x["allowed"])
    bob, page = user(browser, server, "bob")  # ads may run the jobs of one folder, with a date
    try:
        page.goto(link(server.url, "preflight", checkpoint=str(teams.clicks)))
        expect(page.get_by_text("The changed job's script").first).to_be_visible(timeout=60_000)
        expect(page.get_by_role("combobox", name="The changed job's script")).to_have_value(str(jobs / "orders_v2.py"))
        expect(page.get_by_text(f"{jobs}/*.py", exact=True).first).to_be_visible()  # what the policy names
        expect(page.get_by_text("--date=*", exact=True).first).to_be_visible()
        assert page.get_by_text("Run it in the folder").count() == 0  # it runs in its script's folder
        for args, says in (
            ("--date=2026-11-27 --rm", "The argument '--rm' is not one"),
            (f"--date={teams.pay / 'inputs'}", "not among the folders bob@example.com may open"),
        ):
            page.get_by_label("Its arguments").fill(args)
            page.get_by_label("Its arguments").press("Enter")
            idle(page)
            page.get_by_role("button", name="Check before deploying").click()
            expect(page.get_by_text(says).first).to_be_visible(timeout=60_000)
            clean(teams, page, f"job {args}")
    finally:
        bob.close()
    jobs_run = [x for x in audit_lines(server.audit) if x.get("event") == "job"]
    assert {x["args"] for x in jobs_run} >= {"--date=2026-11-27 --rm", f"--date={teams.pay / 'inputs'}"}
    assert all(x["script"] == str(jobs / "orders_v2.py") and x["checkpoint"] == str(teams.clicks) for x in jobs_run)
    assert os.path.exists(jobs / "orders_v2.py")
