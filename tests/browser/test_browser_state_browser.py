"""In a real Chromium, the state browser: the operator chosen is the operator shown (two operators
whose stores both read "default" once showed the previous choice's rows), a window's bounds read as
times, every key field is its own column, and a grid is as tall as its rows."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from playwright.sync_api import expect

from support import ARTIFACTS, sample

GRID = '[data-testid="stDataFrame"]'


def _headers(page: Any, index: int = 0) -> list[str]:
    return page.locator(GRID).nth(index).locator('[role="columnheader"]').all_inner_texts()  # type: ignore[no-any-return]


def test_the_operator_chosen_is_the_one_shown(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{app_url}/browser?" + urllib.parse.urlencode({"checkpoint": sample("compat/4.3.0/dedup_then_window")}))
    caption = page.get_by_text(re.compile(r"rows · operator \d, store default"))
    expect(caption).to_contain_text("operator 0", timeout=180_000)
    for op, key in (("1", "key.event_id"), ("0", "key.window.start"), ("1", "key.event_id")):
        page.get_by_role("combobox", name="Operator").click()
        page.get_by_role("option", name=re.compile(f"^{op}:")).click()
        expect(caption).to_contain_text(f"operator {op}", timeout=60_000)
        # the grid draws on a canvas; its accessible table (off screen) names the columns
        expect(page.locator(GRID).first.locator('[role="columnheader"]').filter(has_text=key)).to_have_count(1, timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "state-browser-operator.png"), full_page=True)


def test_window_bounds_read_as_times_and_grids_fit_their_rows(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{app_url}/browser?" + urllib.parse.urlencode({"checkpoint": sample("windowed_agg")}))
    expect(page.get_by_text(re.compile(r"^\d+ rows · operator 0")).first).to_be_visible(timeout=180_000)
    grid = page.locator(GRID).first
    expect(grid.locator('[role="columnheader"]').filter(has_text="key.window.start")).to_have_count(1, timeout=60_000)
    assert _headers(page)[:3] == ["key.window.start", "key.window.end", "key.user_id"]
    cells = grid.locator('[role="gridcell"]').all_inner_texts()
    assert cells and re.fullmatch(r"2026-01-01 \d\d:\d\d:\d\d\+00:00", cells[0]), cells[:3]
    assert not [c for c in cells if re.fullmatch(r"\d{13}", c)], "a window bound shown as epoch milliseconds"
    # one key across two batches: a grid of a row or two is as tall as those rows, not padded to 500 px
    page.get_by_role("textbox", name="Key").fill("user-1")
    page.get_by_role("textbox", name="Key").press("Enter")
    small = page.get_by_text(re.compile(r"^At batch \d+: \d row")).first
    expect(small).to_be_visible(timeout=60_000)
    rows = int(re.search(r": (\d) row", small.inner_text()).group(1))  # type: ignore[union-attr]
    box = page.locator(f"{GRID} >> visible=true").nth(1).bounding_box()  # the first is the rows tab's
    assert box is not None and box["height"] <= 38 + 35 * max(rows, 1) + 8, box
    page.screenshot(path=str(ARTIFACTS / "state-browser-windows.png"), full_page=True)
