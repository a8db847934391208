"""In a real Chromium at 1024 and 1400 px: no button label and no metric on the Overview and the
health page is cut (an element's text wider than its box, shown as "P..." or "c5c…")."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from support import ARTIFACTS

CUT = """
() => {
  const cut = [];
  const check = (el, what) => {
    if (el.offsetParent === null) return;  // hidden (another tab)
    if (el.scrollWidth > el.clientWidth + 1) cut.push(`${what}: '${el.innerText}' needs ${el.scrollWidth}px, has ${el.clientWidth}px`);
  };
  document.querySelectorAll('[data-testid="stDownloadButton"] button, [data-testid="stBaseButton-secondary"], [data-testid="stBaseButton-primary"]')
    .forEach(b => { check(b, 'button'); b.querySelectorAll('p, div').forEach(x => check(x, 'button label')); });
  document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricLabel"]')
    .forEach(m => { check(m, 'metric'); m.querySelectorAll('div, p').forEach(x => check(x, 'metric text')); });
  return cut;
}
"""


@pytest.mark.parametrize("width", [1024, 1400])
def test_nothing_is_cut(browser, app_url: str, width: int) -> None:  # type: ignore[no-untyped-def]
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    page = ctx.new_page()
    try:
        page.goto(app_url)
        expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
        page.get_by_role("radio", name="windowed_agg").click()
        expect(page.locator("code").filter(has_text="sample_checkpoints/windowed_agg")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Late rows dropped", exact=True).first).to_be_visible(timeout=60_000)
        expect(page.get_by_role("button", name="CSV").first).to_be_visible(timeout=60_000)
        page.wait_for_timeout(1500)  # let the layout settle
        page.screenshot(path=str(ARTIFACTS / f"overview-{width}.png"), full_page=True)
        assert page.get_by_role("button", name="PNG").count() >= 2
        assert page.evaluate(CUT) == []
        page.get_by_role("link", name="State health").click()
        expect(page.get_by_text("Rows in state", exact=True)).to_be_visible(timeout=180_000)
        expect(page.get_by_text("Skew max/min", exact=True)).to_be_visible(timeout=180_000)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / f"health-{width}.png"), full_page=True)
        assert page.evaluate(CUT) == []
    finally:
        ctx.close()
