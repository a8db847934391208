"""Sign-in on a shared server, end to end in Chromium: a real OpenID Connect provider on loopback
(oidc-provider-mock) with two users in two groups, the app served with an access policy and
Streamlit's st.login. A user of group A opens A's checkpoints and is refused B's on every page, deep
link, SQL query and download; a signed-out browser sees only the sign-in page; the audit log holds
each question. Then the same policy behind a reverse proxy's identity headers."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

import signin
from signin import audit_lines, link
from support import ARTIFACTS, SAMPLES, sample

A = sample("join_hdfs")  # group payments
B = sample("outer_join_clicks")  # group ads
USERS = {
    "alice": {"sub": "alice", "email": "alice@example.com", "groups": ["payments"]},
    "bob": {"sub": "bob", "email": "bob@example.com", "groups": ["ads"]},
}
REFUSED = "Checkpoint not allowed"


def policy_text(mode: str, audit: Path) -> str:
    return (
        f'[auth]\nmode = "{mode}"\naudit_log = "{audit}"\n'
        f'[groups.payments]\nroots = ["{A}", "{SAMPLES / "event_logs" / "join_hdfs"}"]\n'
        f'[groups.ads]\nroots = ["{B}"]\n'
    )


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from signin.provider(tmp_path_factory.mktemp("oidc"), USERS)


@pytest.fixture(scope="module")
def oidc_app(provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("oidc-app")
    for url in signin.serve(folder, policy_text("oidc", folder / "audit.jsonl"), signin.oidc_secrets(provider), "sign-in-oidc"):
        yield url, folder / "audit.jsonl"


@pytest.fixture(scope="module")
def proxy_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("proxy-app")
    for url in signin.serve(folder, policy_text("proxy", folder / "audit.jsonl"), None, "sign-in-proxy"):
        yield url, folder / "audit.jsonl"


def sign_in(page: Any, url: str, user: str) -> None:
    signin.sign_in(page, url, user, USERS[user]["email"])


def test_signed_out_sees_only_the_sign_in_page(oidc_app: tuple[str, Path], page: Any) -> None:
    url, audit = oidc_app
    for target in (url, link(url, "sql", checkpoint=A, sql="SELECT count(*) FROM op0_left"), link(url, "health", checkpoint=A)):
        page.goto(target)
        expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=60_000)
        body = page.inner_text("body")
        assert "Overview" not in body and "Checkpoint path" not in body and "rows" not in body, body[:500]
    assert [e["event"] for e in audit_lines(audit)].count("signed out") >= 1
    assert all(e["user"] is None for e in audit_lines(audit))


def test_a_user_opens_their_groups_checkpoints_and_is_refused_the_others(
    oidc_app: tuple[str, Path],
    page: Any,
) -> None:
    url, audit = oidc_app
    sign_in(page, url, "alice")
    expect(page.get_by_text("groups: payments")).to_be_visible()
    expect(page.get_by_text("Query id")).to_be_visible(timeout=60_000)  # A's overview (the allowed sample)
    # the shared server's settings and the page that runs a user's script are not offered
    assert page.get_by_role("link", name="Will my change restart?").count() == 0
    assert page.get_by_text("Spark: ").count() == 0

    # every page, by deep link: B's refused, A's answered
    for page_path, extra in (
        ("", {}),
        ("operators", {}),
        ("browser", {}),
        ("health", {}),
        ("why_missing", {"key": "ad-0-1", "operator": "0"}),
        ("sql", {"sql": "SELECT count(*) AS n FROM op0_left"}),
    ):
        page.goto(link(url, page_path, checkpoint=B, **extra))
        expect(page.get_by_text(REFUSED).first).to_be_visible(timeout=60_000)
        expect(page.get_by_text(re.compile("not among the checkpoints alice@example.com may open")).first).to_be_visible()
        assert page.get_by_role("button", name="CSV", exact=True).count() == 0  # nothing of B's to download
    # the listing of every checkpoint under the samples folder is refused too (B's are under it)
    page.goto(link(url, "checkpoints", prefix=str(SAMPLES)))
    expect(page.get_by_text("Folder not allowed").first).to_be_visible(timeout=60_000)

    # A's SQL by deep link runs, and its CSV downloads
    page.goto(link(url, "sql", checkpoint=A, batch="16", sql="SELECT count(*) AS n FROM op0_left"))
    expect(page.get_by_text(re.compile(r"^1 rows · \d+ ms$"))).to_be_visible(timeout=180_000)
    with page.expect_download(timeout=60_000) as dl:
        page.get_by_role("button", name="CSV", exact=True).click()
    assert Path(dl.value.path()).read_text().splitlines() == ['"n"', "72"]
    page.goto(link(url, "why_missing", checkpoint=A, key="ord-1", operator="0"))
    expect(page.get_by_text("Evicted · left side", exact=True)).to_be_visible(timeout=120_000)
    page.screenshot(path=str(ARTIFACTS / "sign-in-alice.png"), full_page=True)

    time.sleep(1)  # the last run's audit line is written as the run ends
    lines = [e for e in audit_lines(audit) if e["user"] == "alice@example.com"]
    questions = [e for e in lines if e["event"] == "question"]
    assert all(e["groups"] == ["payments"] for e in lines)
    refused = [e for e in questions if not e["allowed"]]
    assert {e["page"] for e in refused} >= {"overview", "operators", "browser", "health", "why_missing", "sql", "checkpoints"}
    assert all(e["checkpoint"] == B for e in refused if e["page"] != "checkpoints")
    sql = [e for e in questions if e["page"] == "sql" and e["allowed"]]
    assert sql and sql[-1]["checkpoint"] == A and sql[-1]["params"]["sql"] == ["SELECT count(*) AS n FROM op0_left"]
    keys = [e for e in questions if e["page"] == "why_missing" and e["allowed"]]
    assert keys and keys[-1]["params"]["key"] == ["ord-1"]
    downloads = [e for e in lines if e["event"] == "download"]
    assert downloads and downloads[-1]["file"] == "statelens-query.csv" and downloads[-1]["checkpoint"] == A


def test_the_other_group_sees_the_other_way_round(oidc_app: tuple[str, Path], browser: Any) -> None:
    url, audit = oidc_app
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    try:
        sign_in(page, url, "bob")
        page.goto(link(url, "", checkpoint=B))
        expect(page.get_by_text("Query id")).to_be_visible(timeout=60_000)
        deadline = time.monotonic() + 60  # the run's audit line is written when it ends, which may come after its page shows
        while time.monotonic() < deadline and not any(
            e.get("user") == "bob@example.com" and e.get("checkpoint") == B for e in audit_lines(audit)
        ):
            time.sleep(0.2)
        page.goto(link(url, "", checkpoint=A))
        expect(page.get_by_text(REFUSED).first).to_be_visible(timeout=60_000)
        page.get_by_role("button", name="Sign out").click()
        page.get_by_role("button", name="End session").click()  # the provider ends its session, then sends back
        expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=60_000)
        page.goto(link(url, "", checkpoint=B))  # signed out: the link shows nothing of B
        expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=60_000)
        assert "Query id" not in page.inner_text("body")
    finally:
        ctx.close()
    bob = [e for e in audit_lines(audit) if e["user"] == "bob@example.com" and e["event"] == "question"]
    assert [e["allowed"] for e in bob if e["checkpoint"] in (A, B)][-2:] == [True, False]


def test_behind_a_proxy_its_identity_headers_decide(proxy_app: tuple[str, Path], browser: Any) -> None:
    url, audit = proxy_app
    ctx = browser.new_context(
        viewport={"width": 1500, "height": 1000},
        extra_http_headers={"X-Forwarded-Email": "carol@example.com", "X-Forwarded-Groups": "ads"},
    )
    page = ctx.new_page()
    try:
        page.goto(link(url, "", checkpoint=B))
        expect(page.get_by_text("Query id")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("carol@example.com")).to_be_visible()
        page.goto(link(url, "", checkpoint=A))
        expect(page.get_by_text(REFUSED).first).to_be_visible(timeout=60_000)
    finally:
        ctx.close()
    bare = browser.new_context()  # a request that did not come through the proxy: no identity
    page = bare.new_page()
    try:
        page.goto(link(url, "", checkpoint=B))
        expect(page.get_by_text("Not signed in")).to_be_visible(timeout=60_000)
        assert "Query id" not in page.inner_text("body")
    finally:
        bare.close()
    carol = [e for e in audit_lines(audit) if e["user"] == "carol@example.com"]
    assert carol and {e["groups"][0] for e in carol} == {"ads"}
