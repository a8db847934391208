"""In a real Chromium: open the app, pick a bundled sample, run a SQL example, see the rows."""

from __future__ import annotations

import re
import urllib.parse

from playwright.sync_api import expect

from conftest import open_sample
from support import ARTIFACTS, sample


def test_pick_sample_and_run_sql(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    open_sample(page, app_url, "unbounded_agg")
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

    page.get_by_role("link", name="SQL").click()
    expect(page.get_by_role("heading", name="SQL")).to_be_visible(timeout=30_000)
    # the chosen checkpoint is kept across pages, in the sidebar too
    expect(page.get_by_role("textbox", name="Checkpoint path")).to_have_value(re.compile("unbounded_agg$"))
    page.get_by_role("combobox", name="Example queries").click()
    page.get_by_role("option", name=re.compile("rows per partition")).click()
    # the one editor now holds the example (no second editor mounts beside it), then Run in it
    editor = page.frame_locator("iframe[title*='code_editor']")
    expect(editor.locator(".ace_text-layer")).to_contain_text("count(*) AS rows FROM op0 GROUP BY ALL", timeout=30_000)
    expect(page.locator("iframe[title*='code_editor']")).to_have_count(1)
    editor.get_by_role("button", name="Run").click()
    # the first query starts Spark and loads op0: allow for the JVM start
    caption = page.get_by_text(re.compile(r"^\d+ rows · \d+ ms$"))
    expect(caption).to_be_visible(timeout=180_000)
    assert caption.inner_text().startswith("4 rows")  # 4 shuffle partitions
    page.screenshot(path=str(ARTIFACTS / "sql.png"), full_page=True)


LONG_SQL = (
    "SELECT partition_id, count(*) AS state_rows, min(key.field0) AS first_key, max(key.field0) AS last_key, "
    "sum(length(CAST(key.field0 AS VARCHAR))) AS key_characters, count(DISTINCT key.field0) AS distinct_keys "
    "FROM op0_left GROUP BY partition_id ORDER BY partition_id"
)


def test_linked_long_query_wraps_with_run_in_sight(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    query = urllib.parse.urlencode([("checkpoint", sample("join_hdfs")), ("batch", "16"), ("sql", LONG_SQL)])
    page.goto(f"{app_url}/sql?{query}")
    expect(page.get_by_text(re.compile(r"^4 rows · \d+ ms$"))).to_be_visible(timeout=180_000)  # the link ran it
    examples = page.get_by_role("combobox", name="Example queries")
    expect(examples).to_have_count(1)  # a rerun may show the old select a moment beside the new
    expect(examples).to_have_value("(your query)")  # not an example the editor does not hold
    page.mouse.move(1, 1)  # nowhere near the editor
    editor = page.frame_locator("iframe[title*='code_editor']")
    run = editor.get_by_role("button", name="Run")
    assert run.evaluate("b => getComputedStyle(b).opacity") == "1"  # seen without hovering
    # the long line wraps in the editor (one line, several rows on screen) and in the query shown
    expect(editor.locator(".ace_line_group")).to_have_count(1)
    assert editor.locator(".ace_line_group .ace_line").count() > 1
    page.get_by_text("The query that produced this result").click()
    shown = page.locator("pre").filter(has_text="distinct_keys").first
    assert shown.evaluate("e => e.scrollWidth <= e.clientWidth"), "the query shown scrolls sideways"
    # picking an example puts it in the editor and the select names it
    page.get_by_role("combobox", name="Example queries").click()
    page.get_by_role("option", name="Join 0: unmatched rows per side").click()
    expect(editor.locator(".ace_text-layer")).to_contain_text("op0_left_keyWithIndexToValue", timeout=30_000)
    expect(examples).to_have_count(1)
    expect(examples).to_have_value("Join 0: unmatched rows per side")
    page.screenshot(path=str(ARTIFACTS / "sql_linked.png"), full_page=True)
