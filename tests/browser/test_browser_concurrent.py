"""Five browser sessions at once, each on another checkpoint, all through the server's one
SparkSession: every one gets its own correct answer."""

from __future__ import annotations

import urllib.parse

from playwright.sync_api import expect

from support import sample

CASES = [
    ("join_hdfs", "ord-154", "Join condition not met"),
    ("join_rocksdb", "ord-6", "Evicted"),
    ("session_window", "user-0", "Session open"),
    ("dedup", "ev-115", "Dropping duplicates"),
    ("windowed_agg", "user-1", "Waiting for the watermark"),
]


def test_five_sessions_at_once(app_url: str, browser) -> None:  # type: ignore[no-untyped-def]
    contexts = [browser.new_context(viewport={"width": 1300, "height": 900}) for _ in CASES]
    pages = []
    for ctx, (name, key, _) in zip(contexts, CASES, strict=True):
        page = ctx.new_page()
        query = urllib.parse.urlencode([("checkpoint", sample(name)), ("operator", "0"), ("key", key)])
        page.goto(f"{app_url}/why_missing?{query}", wait_until="commit")  # do not wait: all five run together
        pages.append(page)
    try:
        for page, (name, key, verdict) in zip(pages, CASES, strict=True):
            card = page.get_by_role("heading", level=4).filter(has_text=key)  # the key's verdict card
            expect(card).to_contain_text(verdict, timeout=240_000)
            expect(page.get_by_role("textbox", name="Checkpoint path")).to_have_value(sample(name), timeout=60_000)
            expect(page.locator("code").filter(has_text=key).first).to_be_visible()
    finally:
        for ctx in contexts:
            ctx.close()
