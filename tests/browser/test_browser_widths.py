"""In a real Chromium at 1024 and 1400 px (each page drawn once, the window resized to each width):
nothing is cut. No button label, metric, select (its chosen option), table ("Operators at a
glance") or chart title is wider than its box (shown as "P...", "c5c…" or "0: symmetricHashJoi"),
on the Overview, the health page and the why-missing page, with the longest operator names of the
samples (a join's four stores, transformWithState)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from conftest import idle, open_sample, press
from support import ARTIFACTS, sample

CUT = """
() => {
  const cut = [];
  const check = (el, what) => {
    if (el.offsetParent === null) return;  // hidden (another tab)
    if (el.scrollWidth > el.clientWidth + 1) cut.push(`${what}: '${el.innerText || el.value}' needs ${el.scrollWidth}px, has ${el.clientWidth}px`);
  };
  document.querySelectorAll('[data-testid="stDownloadButton"] button, [data-testid="stBaseButton-secondary"], [data-testid="stBaseButton-primary"]')
    .forEach(b => { check(b, 'button'); b.querySelectorAll('p, div').forEach(x => check(x, 'button label')); });
  document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricLabel"]')
    .forEach(m => { check(m, 'metric'); m.querySelectorAll('div, p').forEach(x => check(x, 'metric text')); });
  document.querySelectorAll('[data-testid="stMain"] [data-testid="stSelectbox"] input[role="combobox"]')
    .forEach(i => check(i, 'select ' + i.getAttribute('aria-label')));
  document.querySelectorAll('[data-testid="stTable"]').forEach(t => { check(t, 'table'); Array.from(t.children).forEach(x => check(x, 'table')); });
  // a Plotly title is cut at the plot's edge: titles are text above the chart, which wraps
  document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot .gtitle').forEach(t => cut.push(`chart title inside the plot: '${t.textContent}'`));
  return cut;
}
"""


WIDTHS = (1024, 1400)


def _uncut(page: Any, shot: str) -> None:
    """At each width (the window resized, as a user does; the page is not run again): nothing cut."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(1500)  # let the layout settle
        page.screenshot(path=str(ARTIFACTS / f"{shot}-{width}.png"), full_page=True)
        assert page.evaluate(CUT) == [], f"{shot} at {width} px"


def _visit(page: Any, url: str, ready: list[str], shot: str) -> None:
    page.goto(url)
    for text in ready:
        expect(page.get_by_text(text, exact=True).first).to_be_visible(timeout=180_000)
    idle(page)
    _uncut(page, shot)


def test_nothing_is_cut_at_either_width(browser, app_url: str) -> None:  # type: ignore[no-untyped-def]
    ctx = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    page = ctx.new_page()
    try:
        open_sample(page, app_url, "windowed_agg")
        expect(page.get_by_text("Late rows dropped", exact=True).first).to_be_visible(timeout=60_000)
        expect(page.get_by_role("button", name="CSV").first).to_be_visible(timeout=60_000)
        idle(page)
        assert page.get_by_role("button", name="PNG").count() >= 2
        _uncut(page, "overview")
        page.get_by_role("link", name="State health").click()
        expect(page.get_by_text("Rows in state", exact=True)).to_be_visible(timeout=180_000)
        expect(page.get_by_text("Skew max/min", exact=True)).to_be_visible(timeout=180_000)
        _uncut(page, "health")
        join, tws = sample("join_hdfs"), sample("transform_with_state")
        _visit(page, f"{app_url}/?checkpoint={join}", ["Operators at a glance", "symmetricHashJoin"], "overview-join")
        assert page.get_by_text("right-keyWithIndexToValue").first.is_visible()  # the fourth store, on screen
        _visit(page, f"{app_url}/health?checkpoint={join}", ["Skew max/min", "Hottest keys"], "health-join")
        _visit(page, f"{app_url}/health?checkpoint={tws}", ["Skew max/min"], "health-tws")
        expect(page.get_by_role("combobox", name="Operator")).to_have_value("0: transformWithStateInPandasExec")
        _visit(page, f"{app_url}/why_missing?checkpoint={join}&operator=0", ["Which keys never matched?"], "why-missing")
        page.get_by_text("Which keys never matched?", exact=True).click()
        press(page, "Find them", page.get_by_text("Waiting for the other side", exact=True))
        _uncut(page, "why-missing-unmatched")
    finally:
        ctx.close()
