"""In a real Chromium: download the health report, open it, and read its growth chart's trace
colours from Plotly itself: one distinct colour per store."""

from __future__ import annotations

from playwright.sync_api import expect

from conftest import open_sample
from support import ARTIFACTS


def test_report_download_has_distinct_growth_colours(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    open_sample(page, app_url, "hot_key_join")
    page.get_by_role("link", name="State health").click()
    button = page.get_by_role("button", name="Download the health report (one HTML file)")
    expect(button).to_be_visible(timeout=180_000)
    with page.expect_download(timeout=120_000) as dl:
        button.click()
    path = ARTIFACTS / "health-report.html"
    dl.value.save_as(path)
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0", timeout=60_000)
    colours = page.evaluate(
        """() => {
            for (const plot of document.querySelectorAll('.js-plotly-plot')) {
                const title = plot.layout && plot.layout.title && plot.layout.title.text;
                if (title === 'State growth per batch') {
                    return plot.data.filter(t => t.showlegend !== false).map(t => t.line.color);
                }
            }
            return null;
        }"""
    )
    assert colours is not None, "the report has a growth chart"
    assert len(colours) == 4 and len(set(colours)) == 4, colours
