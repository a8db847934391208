"""A real State Lens server and a real Chromium (Debian's), shared by the browser tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import expect

from support import ARTIFACTS, ROOT, WORKER

# a page on a loaded machine (the suite runs four files side by side on two cores) may take longer
# than Playwright's 5 s to finish a rerun: wait as a user would, the assertions stay the same
expect.set_options(timeout=20_000)
FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    rep = yield
    if rep.when == "call" and rep.failed:
        item.stash[FAILED] = True
    return rep


def idle(page) -> None:  # type: ignore[no-untyped-def]
    """Wait until the page's script run is over (no "Running..." in the header). A click while a run
    is still going can be dropped by Streamlit (the run it interrupts resets button triggers): a user
    sees the page still running and waits; so do the tests before they click."""
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=180_000)


def press(page, name: str, answer, timeout: float = 180_000) -> None:  # type: ignore[no-untyped-def]
    """Click the button ``name`` and wait for ``answer`` (a locator), as a user would: the page idle
    first, and a click again when after 15 s the page neither runs nor answers (under load Streamlit
    can drop a click that arrives as a run ends, however long the test then waits)."""
    button = page.get_by_role("button", name=name)
    for _ in range(3):
        idle(page)
        button.click()
        try:
            expect(page.get_by_test_id("stStatusWidget").or_(answer).first).to_be_visible(timeout=15_000)
            break
        except AssertionError:
            continue
    expect(answer.first).to_be_visible(timeout=timeout)


def open_sample(page, app_url: str, name: str) -> None:  # type: ignore[no-untyped-def]
    """Open the app and pick a bundled sample by its pill, as a user does: the page first, its run
    over, then the pill (under load the sidebar can take long to arrive; a server busy with other
    tests' JVMs drops nothing, it is only slow), until the Overview shows the sample's path."""
    page.goto(app_url)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
    idle(page)
    pill = page.get_by_role("radio", name=name)
    expect(pill).to_be_visible(timeout=180_000)
    pill.click()
    expect(page.locator("code").filter(has_text=f"sample_checkpoints/{name}")).to_be_visible(timeout=60_000)


# Debian's Chromium built as a headless shell (the Blink and V8 of /usr/bin/chromium without its desktop
# shell: what Playwright itself runs headless): a page load costs half the CPU of the whole browser
# (1.1 against 2.3 CPU s, process accounting) on a suite whose 2 cores are busy from end to end
CHROMIUM = os.environ.get("STATELENS_CHROMIUM", "/usr/bin/chromium-headless-shell")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class AppServer:
    url: str
    pid: int  # the Streamlit server itself: start.sh and cli.py app exec into it
    sql_timeout: float  # seconds: the SQL page's time limit in this server


# the one default changed from a user's: a busy machine serves pages slower while a long query runs,
# and the no-freeze test needs that query still running when the other session's page arrives
SQL_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def app_server() -> Iterator[AppServer]:
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = (ARTIFACTS / f"streamlit{WORKER}.log").open("w")
    # started as a user starts it (the README's command), so the tests see its defaults (but one)
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "start.sh"), "--server.headless", "true", "--server.port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "STATELENS_SQL_TIMEOUT": str(SQL_TIMEOUT)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"the Streamlit server did not start; see test-artifacts/streamlit{WORKER}.log")
    yield AppServer(url, proc.pid, SQL_TIMEOUT)
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.fixture(scope="session")
def app_url(app_server: AppServer) -> str:
    return app_server.url


@pytest.fixture(scope="session")
def browser():  # type: ignore[no-untyped-def]
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium-headless-shell (the test command does).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    pg = ctx.new_page()
    # an action (a click) waits for the page to take it: on a loaded machine a page drawing its first
    # run took over Playwright's 30 s (CI, a sample pill); the same click, given the time a user gives
    pg.set_default_timeout(90_000)
    yield pg
    if request.node.stash.get(FAILED, False):  # what the page showed, in CI's output and as a picture
        shot = ARTIFACTS / f"failed-{request.node.name}.png"[:200]
        try:
            pg.screenshot(path=str(shot), full_page=True)
            print(f"page at failure ({pg.url}), screenshot {shot}:\n{pg.inner_text('body', timeout=5_000)[:3000]}")
        except Exception as e:  # the page itself may be what failed
            print(f"page at failure: not readable ({type(e).__name__}: {e})")
    ctx.close()
