"""In a real Chromium, what a new user found, each fixed: the health page says once that a store has
too little state to judge skew; a checkpoint typed as Spark writes its URIs (file:/...) opens; a
join key's timeline tells its two sides apart; an outer join's unmatched keys read as emitted
null-padded (the type from the event log's plan); a change feed filtered by the native reader says so."""

from __future__ import annotations

import re
import urllib.parse
from urllib.parse import quote

from playwright.sync_api import expect

from conftest import idle, press
from support import ARTIFACTS, sample


def test_too_little_state_is_said_once(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    # two operators, both with too little state: one note, not one per store and again in the skew tab
    page.goto(f"{app_url}/health?" + urllib.parse.urlencode({"checkpoint": sample("compat/4.3.0/dedup_then_window")}))
    expect(page.get_by_text("Skew max/min").first).to_be_visible(timeout=240_000)
    page.wait_for_timeout(1500)
    expect(page.get_by_text(re.compile("too_little_state_for_skew"))).to_have_count(1)
    expect(page.get_by_text(re.compile("Skew is not judged for 2 store"))).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "health-little-state.png"), full_page=True)


def test_a_checkpoint_typed_as_spark_writes_it(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    for spelling in (f"file:{sample('windowed_agg')}", "file://" + quote(sample("windowed_agg"))):
        page.goto(app_url)
        box = page.get_by_role("textbox", name="Checkpoint path")
        expect(box).to_be_visible(timeout=120_000)
        box.fill(spelling)
        box.press("Enter")
        expect(page.get_by_text("Operators at a glance").first).to_be_visible(timeout=120_000)
        expect(page.get_by_role("alert")).to_have_count(0)


def test_a_join_keys_timeline_tells_its_sides_apart(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    query = urllib.parse.urlencode([("checkpoint", sample("join_hdfs")), ("operator", "0"), ("key", "ord-6")])
    page.goto(f"{app_url}/why_missing?{query}")
    expect(page.get_by_text("Evicted · both sides", exact=True)).to_be_visible(timeout=240_000)
    page.get_by_role("tab", name="Timeline").first.click()
    plot = page.locator(".js-plotly-plot").first
    expect(plot).to_be_visible(timeout=60_000)
    traces = plot.evaluate("p => p.data.filter(t => t.mode === 'markers').map(t => [t.name, t.marker.symbol])")
    own = [(n.split(" (=")[0], s) for n, s in traces]  # a trace drawn over another names it after "(="
    left = {s for n, s in own if n.endswith("(left side)")}
    right = {s for n, s in own if n.endswith("(right side)")}
    assert left and right and not left & right, traces


def test_an_outer_joins_unmatched_keys_read_as_emitted_null_padded(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    query = urllib.parse.urlencode([("checkpoint", sample("outer_join_clicks")), ("operator", "0")])
    page.goto(f"{app_url}/why_missing?{query}")  # a bundled sample: its event log (the plan: left outer) is filled in
    expect(page.get_by_text("Which keys never matched?", exact=True)).to_be_visible(timeout=240_000)
    idle(page)
    page.get_by_text("Which keys never matched?", exact=True).click()
    press(page, "Find them", page.get_by_text("Emitted unmatched (null-padded)"), timeout=240_000)
    expect(page.get_by_text("Join condition not met").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "unmatched-outer.png"), full_page=True)


def test_a_change_feed_filtered_natively_says_so(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{app_url}/browser?" + urllib.parse.urlencode({"checkpoint": sample("windowed_agg")}))
    box = page.get_by_role("textbox", name="Key")
    expect(box).to_be_visible(timeout=240_000)
    box.fill("user-1")
    box.press("Enter")
    expect(page.get_by_text(re.compile(r"the change feed, filtered by the native reader"))).to_be_visible(timeout=120_000)
    expect(page.get_by_text(re.compile(r"filtered in Spark"))).to_have_count(0)
