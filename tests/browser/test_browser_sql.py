"""In a real Chromium: open the app, pick a bundled sample, run a SQL example, see the rows."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from support import ARTIFACTS


def test_pick_sample_and_run_sql(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(app_url)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
    page.get_by_role("radio", name="unbounded_agg").click()  # a sample pill
    expect(page.locator("code").filter(has_text="sample_checkpoints/unbounded_agg")).to_be_visible(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

    page.get_by_role("link", name="SQL").click()
    expect(page.get_by_role("heading", name="SQL")).to_be_visible(timeout=30_000)
    # the chosen checkpoint is kept across pages, in the sidebar too
    expect(page.get_by_role("textbox", name="Checkpoint path")).to_have_value(re.compile("unbounded_agg$"))
    page.get_by_role("combobox", name="Example queries").click()
    page.get_by_role("option", name=re.compile("rows per partition")).click()
    # picking an example opens a fresh editor holding it: wait until the old one is gone, then Run in it
    expect(page.locator("iframe[title*='code_editor']")).to_have_count(1, timeout=30_000)
    page.frame_locator("iframe[title*='code_editor']").get_by_role("button", name="Run").click()
    # the first query starts Spark and loads op0: allow for the JVM start
    caption = page.get_by_text(re.compile(r"^\d+ rows · \d+ ms$"))
    expect(caption).to_be_visible(timeout=180_000)
    assert caption.inner_text().startswith("4 rows")  # 4 shuffle partitions
    page.screenshot(path=str(ARTIFACTS / "sql.png"), full_page=True)
