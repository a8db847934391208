"""In a real Chromium: with Live on, the Overview follows a checkpoint that a running query
keeps committing to, without a click, and highlights the newest batch."""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import expect
from restart_errors import _conf as confs  # the session's confs set for a block, then restored

from statelens.spark_io.logs.checkpoint import read_checkpoint


def test_live_overview_follows_new_commits(app_url: str, page, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cp = tmp_path / "live"
    with confs(spark, {"spark.sql.shuffle.partitions": "2"}):
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 50)
            .load()
            .selectExpr("CAST(value % 20 AS STRING) AS k")
            .groupBy("k")
            .count()
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(cp))
            .trigger(processingTime="4 seconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 60
            while not (cp / "commits").is_dir() or not read_checkpoint(str(cp)).committed_batches:
                assert time.monotonic() < deadline, "the query committed nothing in 60 s"
                time.sleep(0.5)
            page.goto(f"{app_url}/?checkpoint={urllib.parse.quote(str(cp))}")
            expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
            page.get_by_text("Live: refresh on new commits").click()
            expect(page.get_by_text(re.compile(r"live · checked"))).to_be_visible(timeout=30_000)
            caption = page.get_by_text(re.compile(r"The newest committed batch, \d+, is highlighted"))
            expect(caption).to_be_visible(timeout=30_000)
            first = int(re.search(r"batch, (\d+),", caption.inner_text()).group(1))  # type: ignore[union-attr]
            # no click from here: the page must move on by itself as the query commits
            expect(page.get_by_text(re.compile(rf"The newest committed batch, (?!{first},)\d+, is highlighted"))).to_be_visible(
                timeout=60_000
            )
            later = int(
                re.search(r"batch, (\d+),", page.get_by_text(re.compile("The newest committed batch")).inner_text()).group(1)  # type: ignore[union-attr]
            )
            assert later > first
        finally:
            query.stop()
