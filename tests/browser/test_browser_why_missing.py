"""In a real Chromium: a linked diagnosis opens on its checkpoint, operator and keys, and explains them."""

from __future__ import annotations

import urllib.parse

from playwright.sync_api import expect

from support import ARTIFACTS, sample


def test_linked_diagnosis(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    query = urllib.parse.urlencode(
        [("checkpoint", sample("join_rocksdb")), ("operator", "0"), ("key", "ord-155"), ("key", "ord-6")]
    )
    page.goto(f"{app_url}/why_missing?{query}")
    expect(page.get_by_role("heading", name="Why is my key missing?")).to_be_visible(timeout=60_000)
    # the link, not the sidebar default, chose the checkpoint and the keys
    expect(page.get_by_role("textbox", name="Checkpoint path")).to_have_value(sample("join_rocksdb"), timeout=60_000)
    keys_box = page.get_by_role("textbox", name="Keys that never showed up in the output (one per line)")
    expect(keys_box).to_have_value("ord-155\nord-6", timeout=120_000)  # shown once Spark has started
    # a linked diagnosis runs on open, without a click
    expect(page.get_by_text("Waiting for the other side · left side")).to_be_visible(timeout=180_000)
    expect(page.get_by_text("Evicted · both sides", exact=True)).to_be_visible()  # ord-6 left both sides
    expect(page.get_by_text("ORD-155").first).to_be_visible()  # the near miss
    page.get_by_role("tab", name="Timeline").first.click()
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "why_missing.png"), full_page=True)
