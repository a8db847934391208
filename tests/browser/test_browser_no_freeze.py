"""One browser session's long query does not freeze another session's pages; the long query
is stopped by the SQL time limit with a clear message."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from spark_io.limits import DEFAULT_TIMEOUT

HEAVY = "SELECT sum(a.range * b.range % 7) AS s FROM range(400000) a, range(400000) b"


def test_long_query_does_not_freeze_other_sessions(app_url: str, browser) -> None:  # type: ignore[no-untyped-def]
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
        t0 = time.monotonic()
        b.goto(app_url)
        expect(b.get_by_text("Last committed")).to_be_visible(timeout=20_000)
        served = time.monotonic() - t0
        # B was served while A still ran: before A's time limit (30 s from its start) could stop it
        assert served < min(20, DEFAULT_TIMEOUT), served
        expect(a.get_by_text("the time limit")).to_be_visible(timeout=90_000)  # then A's limit stops it
    finally:
        a.context.close()
        b.context.close()
