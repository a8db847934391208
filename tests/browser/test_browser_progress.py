"""In a real Chromium: the Overview's late-rows, input-rate and duration charts from the bundled
windowed_agg sample's real (rolling) event log, read from the drawn Plotly figures."""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from conftest import open_sample
from support import ARTIFACTS, SAMPLES

# a chart's title is the text above it (st.markdown), which wraps where a Plotly title is cut
TITLE_OF = """
const titleOf = p => {
    const box = p.closest('[data-testid="stElementContainer"]');
    const above = box && box.previousElementSibling;
    return above ? above.innerText.trim() : '';
};
"""
HAS_PLOT = (
    "() => {" + TITLE_OF + "return Array.from(document.querySelectorAll('.js-plotly-plot')).some(p => titleOf(p).includes(%r)); }"
)
PLOTS = (
    "() => {"
    + TITLE_OF
    + """
return Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => ({
    title: titleOf(p),
    inner_title: (p.layout.title && p.layout.title.text) || '',
    traces: p.data.map(t => ({name: t.name, type: t.type, x: Array.from(t.x || []), y: Array.from(t.y || [])})),
    width: p.getBoundingClientRect().width,
})); }"""
)


def _plots(page):  # type: ignore[no-untyped-def]
    return {p["title"]: p for p in page.evaluate(PLOTS)}


def test_overview_progress_charts(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    truth = json.loads((SAMPLES / "outputs" / "windowed_agg.progress.json").read_text())
    open_sample(page, app_url, "windowed_agg")
    expect(page.get_by_text("13 / 13", exact=True).first).to_be_visible(timeout=60_000)  # windowed_agg's progress
    title = "Late rows dropped by the watermark"
    # wait for this sample's chart (a page shown before may still hold another sample's)
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".some(p => p.data.some(t => t.name === 'operator 0 (stateStoreSave)'))",
        timeout=60_000,
    )
    late = _plots(page)[title]
    assert late["width"] > 300 and not late["inner_title"]  # drawn, its title above it
    (trace,) = late["traces"]
    assert trace["name"] == "operator 0 (stateStoreSave)" and trace["type"] == "bar"
    dropped = {p["batchId"]: p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in truth}
    assert dict(zip(trace["x"], trace["y"], strict=True)) == dropped
    assert {b: n for b, n in dropped.items() if n} == {4: 1, 7: 2, 10: 3}

    page.get_by_role("tab", name="Input and rates").click()
    page.wait_for_function(HAS_PLOT % "Input per batch", timeout=60_000)
    rates = next(p for t, p in _plots(page).items() if t.startswith("Input per batch"))
    bars = next(t for t in rates["traces"] if t["name"] == "input rows")
    assert bars["y"] == [sum(s["numInputRows"] for s in p["sources"]) for p in truth]
    assert {t["name"] for t in rates["traces"]} == {"input rows", "input rows/s", "processed rows/s"}

    page.get_by_role("tab", name="Durations").click()
    page.wait_for_function(HAS_PLOT % "Batch duration by phase", timeout=60_000)
    durations = _plots(page)["Batch duration by phase"]
    add_batch = next(t for t in durations["traces"] if t["name"] == "addBatch")
    scale = 1000 if max(p["batchDuration"] for p in truth) >= 10_000 else 1
    assert add_batch["y"] == [p["durationMs"]["addBatch"] / scale for p in truth]
    page.screenshot(path=str(ARTIFACTS / "overview-progress.png"), full_page=True)

    # the event log stays chosen on another page: the health page finds the late rows
    page.get_by_role("link", name="State health").click()
    expect(page.get_by_text("late_rows_dropped", exact=True).first).to_be_visible(timeout=180_000)
    expect(page.get_by_role("textbox", name="Event log (optional)")).to_have_value(re.compile("event_logs/windowed_agg$"))
