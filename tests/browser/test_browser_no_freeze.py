"""One browser session's long query does not freeze another session's pages; its Cancel stops the
query itself (DuckDB leaves the server's cores at once, long before the SQL time limit)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from playwright.sync_api import expect

from conftest import AppServer

HEAVY = "SELECT sum(a.range * b.range % 7) AS s FROM range(400000) a, range(400000) b"


def _cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (all its threads: DuckDB's among them)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_long_query_does_not_freeze_other_sessions(app_server: AppServer, browser) -> None:  # type: ignore[no-untyped-def]
    app_url, limit = app_server.url, app_server.sql_timeout
    a = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    b = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    try:
        a.goto(f"{app_url}/sql")
        expect(a.get_by_role("heading", name="SQL")).to_be_visible(timeout=60_000)
        a.get_by_text("Plain editor").click()
        box = a.get_by_role("textbox", name="Query")
        expect(box).to_be_visible(timeout=30_000)
        # the toggle's rerun is over when Run shows: a rerun still going would send the text area its
        # value again and replace what was typed
        expect(a.get_by_role("button", name="Run")).to_be_visible(timeout=60_000)
        expect(a.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=60_000)
        box.fill(HEAVY)
        box.press("Control+Enter")  # commit the text area's value
        # the server holds the typed query: the example select no longer names an example
        examples = a.get_by_role("combobox", name="Example queries")
        expect(examples).to_have_count(1, timeout=30_000)
        expect(examples).to_have_value("(your query)", timeout=30_000)
        a.get_by_role("button", name="Run").click()
        expect(a.get_by_role("button", name="Cancel")).to_be_visible(timeout=30_000)  # A is running
        b.goto(app_url)
        expect(b.get_by_text("Last committed")).to_be_visible(timeout=limit * 1000)
        # B was served while A still ran: A's query had not yet been stopped by its time limit
        # (an outcome, not a stopwatch: a busy machine serves B slower, a frozen server not at all)
        assert a.get_by_text("the time limit").count() == 0
        assert a.get_by_role("button", name="Cancel").is_visible()
        a.get_by_role("button", name="Cancel").click()
        expect(a.get_by_text("Loading the tables the query names, then running it: cancelled.")).to_be_visible(timeout=30_000)
        for page in (a, b):
            expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=60_000)
        before, t0 = _cpu_seconds(app_server.pid), time.monotonic()
        time.sleep(3)
        busy = (_cpu_seconds(app_server.pid) - before) / (time.monotonic() - t0)
        assert busy < 0.5, f"the server still burns {busy:.1f} cores after Cancel: the query runs on"
        assert a.get_by_text("the time limit").count() == 0
        # the Cancel is over: the next Run runs (it is not answered "cancelled" again)
        box.fill("SELECT 42 AS answer")
        box.press("Control+Enter")
        expect(a.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=60_000)
        a.get_by_role("button", name="Run").click()
        expect(a.get_by_text("1 rows", exact=True)).to_be_visible(timeout=60_000)
    finally:
        a.context.close()
        b.context.close()
