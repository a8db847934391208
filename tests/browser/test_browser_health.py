"""In a real Chromium: the health page of the hot-key sample, and a chart downloaded as PNG."""

from __future__ import annotations

from playwright.sync_api import expect

from conftest import open_sample
from support import ARTIFACTS


def test_health_page_and_png_download(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    open_sample(page, app_url, "hot_key_join")
    page.get_by_role("link", name="State health").click()
    expect(page.get_by_text("hot_key", exact=True).first).to_be_visible(timeout=180_000)
    expect(page.get_by_text("state_skew", exact=True).first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "health.png"), full_page=True)
    with page.expect_download(timeout=120_000) as dl:
        page.get_by_role("button", name="PNG").first.click()
    path = ARTIFACTS / "skew-download.png"
    dl.value.save_as(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
