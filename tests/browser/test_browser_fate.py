"""In a real Chromium, why-missing of the whole query: each of a key's input records as a row
through every operator to the output, coloured by outcome; a window the watermark closed reads
Emitted; a near miss shows its whitespace; Diagnose works at the first click while the keys box
still has focus."""

from __future__ import annotations

import urllib.parse

from playwright.sync_api import expect

from conftest import idle
from support import ARTIFACTS, sample

KEYS_BOX = "Keys that never showed up in the output (one per line)"


def test_a_keys_fate_as_a_flow(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    query = urllib.parse.urlencode([("checkpoint", sample("dedup_window_chain")), ("key", "user-second"), ("key", "user-8")])
    page.goto(f"{app_url}/why_missing?{query}")  # a bundled sample: its event log and input files are filled in
    expect(page.get_by_text("2 input record(s) of user-second").first).to_be_visible(timeout=240_000)
    table = page.locator("table").filter(has_text="input record").first
    expect(table.get_by_role("columnheader", name="operator 1")).to_be_visible()
    expect(table.get_by_role("columnheader", name="operator 0")).to_be_visible()
    record_1 = table.get_by_role("row").filter(has_text="part-00001.json:5")
    expect(record_1).to_contain_text("passed · b1")
    expect(record_1).to_contain_text("reached state · b1")
    expect(record_1).to_contain_text("Emitted · b9")
    record_2 = table.get_by_role("row").filter(has_text="part-00010.json:6")
    expect(record_2).to_contain_text("dropped as late · b10")
    expect(page.get_by_text("Partly written", exact=True).first).to_be_visible()  # the answer: one window went out
    expect(page.get_by_text("dropped as late · operator 1 · batch 10").first).to_be_visible()  # and why the rest did not
    expect(page.get_by_text("Emitted", exact=True).first).to_be_visible()  # the operator's verdict: not a fault
    expect(page.get_by_text("Evicted", exact=True)).to_have_count(0)
    expect(page.get_by_text("'user-8␠'").first).to_be_visible()  # the near miss's trailing space, shown
    page.screenshot(path=str(ARTIFACTS / "why-missing-fate.png"), full_page=True)


def test_diagnose_works_at_the_first_click_while_typing(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{app_url}/why_missing?" + urllib.parse.urlencode({"checkpoint": sample("outer_join_clicks")}))
    box = page.get_by_role("textbox", name=KEYS_BOX)
    expect(box).to_be_visible(timeout=240_000)
    idle(page)  # the page's first run is over: what is tested is typing, then the click
    box.click()
    box.press_sequentially("ad-late-click")  # still focused: the text is not sent before the click
    page.get_by_role("button", name="Diagnose").click()
    expect(page.get_by_text("2 input record(s) of ad-late-click").first).to_be_visible(timeout=240_000)
    row = page.locator("table").filter(has_text="input record").first.get_by_role("row").filter(has_text="parquet")
    expect(row).to_contain_text("dropped as late · b10")
    expect(page.get_by_text("Emitted null-padded · b9").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "why-missing-first-click.png"), full_page=True)
