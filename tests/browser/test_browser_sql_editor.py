"""In a real Chromium: the SQL editor's Run (inside the editor, like Ctrl+Enter) clicked right
after typing runs the text just typed, not the text of a moment before."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def test_run_right_after_typing_runs_the_new_text(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{app_url}/sql")
    expect(page.get_by_role("heading", name="SQL")).to_be_visible(timeout=60_000)
    frame = page.frame_locator("iframe[title*='code_editor']")
    expect(page.locator("iframe[title*='code_editor']")).to_be_visible(timeout=60_000)
    expect(frame.locator(".ace_content").first).to_be_visible(timeout=30_000)
    for n in (41, 42, 43):
        frame.locator(".ace_content").first.click()
        page.keyboard.press("Control+a")
        page.keyboard.type(f"SELECT {n} AS answer", delay=5)
        frame.get_by_role("button", name="Run").click()  # at once: no pause after the last key
        shown = page.locator("code").filter(has_text=re.compile(rf"^SELECT {n} AS answer$"))
        expect(shown.first).to_be_attached(timeout=180_000)  # the result names the SQL that produced it
        expect(page.get_by_text(re.compile(r"^1 rows · \d+ ms$"))).to_be_visible(timeout=30_000)
