"""In a real Chromium, the answer a user reads first on a pipeline of five operators' worth of stories
(filter -> dedup within watermark -> time-range join -> windows -> Parquet): each key's heading says
what reached the output and the root cause, where and when, and its first sentence says it in words;
a mistyped key's look-alike shows its own fate (written, in which batch, which file)."""

from __future__ import annotations

import json
import urllib.parse

from playwright.sync_api import expect

from support import ARTIFACTS, SAMPLES

ADS = SAMPLES / "pipelines" / "ad_campaigns"


def test_outcome_and_cause_first(app_url: str, page) -> None:  # type: ignore[no-untyped-def]
    keys = ["camp-dup", "camp-late", "camp-bot", "camp-a", "camp-case"]
    query = urllib.parse.urlencode([("checkpoint", str(ADS / "checkpoint")), *(("key", k) for k in keys)])
    page.goto(f"{app_url}/why_missing?{query}")  # a bundled pipeline: its event log, input files and sink are filled in
    heading = page.get_by_role("heading", level=4)
    expect(heading.filter(has_text="camp-dup")).to_have_text(
        "camp-dup Lost dropped as a duplicate · operator 2 · batch 2", timeout=240_000
    )
    expect(
        page.get_by_text(
            "Lost: its click c-1 (clicks/part-00002.json row 3) was dropped as a duplicate of the click read in batch 0 "
            "(clicks/part-00000.json row 3) by operator 2 in batch 2; the impression then never matched."
        )
    ).to_be_visible()
    expect(heading.filter(has_text="camp-late")).to_have_text("camp-late Lost dropped as late · operator 2 · batch 11")
    expect(heading.filter(has_text="camp-bot")).to_have_text("camp-bot Lost filtered out · operator 2 · batch 3")
    expect(
        page.get_by_text("was removed by the filter `isnotnull(is_bot) AND NOT is_bot` before operator 2", exact=False)
    ).to_be_visible()
    truth = [r for r in json.loads((ADS / "emitted.json").read_text()) if r["campaign"] == "camp-a"]
    expect(heading.filter(has_text="camp-a")).to_have_text("camp-a Written waiting for the watermark · operator 0")
    expect(page.get_by_text(f"Written: {len(truth)} row(s) of it are in the sink's files", exact=False)).to_be_visible()
    # the operator's own verdict stays, below the answer, and is not the answer
    expect(page.get_by_text("Operator 0's verdict:", exact=False).first).to_be_visible()
    expect(heading.filter(has_text="camp-case")).to_have_text("camp-case Never in the input")
    [row] = [r for r in json.loads((ADS / "emitted.json").read_text()) if r["campaign"] == "CAMP-CASE"]
    near = page.get_by_role("listitem").filter(has_text="'CAMP-CASE'")
    expect(near).to_contain_text(f"written in batch {row['batch_id']}")
    expect(near).to_contain_text(row["file"])
    page.screenshot(path=str(ARTIFACTS / "why-missing-outcome.png"), full_page=True)
