"""In a real Chromium: a pipeline's root drawn as a graph (queries, tables, the lag of each hop), then a
key followed through every hop from the page's button, on the committed Declarative Pipeline."""

from __future__ import annotations

import re
import urllib.parse

from playwright.sync_api import expect

from conftest import idle
from support import ARTIFACTS, SAMPLES

ORDERS = SAMPLES / "sdp" / "orders"


def test_pipeline_drawn_then_a_key_followed(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    import statelens

    p = statelens.open_pipeline(str(ORDERS / "storage"), data_root=str(ORDERS / "warehouse"))
    lag = len(next(h for h in p.hops if h.downstream == "gold").unread)
    query = urllib.parse.urlencode({"root": str(ORDERS / "storage"), "data_root": str(ORDERS / "warehouse")})
    page.goto(f"{app_url}/pipeline?{query}")
    expect(page.get_by_role("heading", name="Pipeline", exact=True)).to_be_visible(timeout=60_000)
    graph = page.locator("[data-testid='stGraphVizChart'] svg")
    expect(graph).to_be_visible(timeout=60_000)
    # drawn: a box per query, a cylinder per table, the hop's lag on its edge
    for name in ("bronze", "silver", "gold", "gold@v0"):
        expect(graph.locator("g.node text", has_text=re.compile(f"^{re.escape(name)}$"))).to_have_count(1)
    expect(graph.locator("g.edge text", has_text=f"lag: {lag} batch(es) not read")).to_have_count(1)
    box = graph.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 80  # a graph, not a dot
    idle(page)
    page.screenshot(path=str(ARTIFACTS / "pipeline.png"), full_page=True)

    page.get_by_role("button", name="Follow a key through this pipeline").click()
    expect(page.get_by_role("heading", name="Why is my key missing?")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("textbox", name="Checkpoint path")).to_have_value(str(ORDERS / "storage"))
    page.get_by_role("textbox", name="Key column").fill("customer")
    page.get_by_role("textbox", name="Keys (one per line)").fill("dave\nheidi")
    idle(page)
    page.get_by_role("button", name="Diagnose").click()
    expect(page.get_by_text(re.compile(r"^dropped as late · in silver · operator 0"))).to_be_visible(timeout=120_000)
    expect(page.get_by_text(re.compile(r"^written upstream, not read yet · in gold"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"^Waiting: silver wrote it in batch"))).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "pipeline_why_missing.png"), full_page=True)
