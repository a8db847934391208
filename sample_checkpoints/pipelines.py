"""Pipelines for the whole-query why-missing: five query shapes, each run for real, with what it emitted.

Each pipeline is written to ``sample_checkpoints/pipelines/<name>/``:

* ``checkpoint/``: the checkpoint (what State Lens opens);
* ``inputs/<source>/``: the input files, one per micro-batch (mtimes set: the file source orders by them);
* ``sink/``: the query's file sink with its ``_spark_metadata`` log (pipelines with a file sink);
* ``event_log/``: the Spark application's event log (its plan per batch and its progress);
* ``emitted.json``: every row the query emitted, with its batch (the file sink's files per
  ``_spark_metadata`` batch, or foreachBatch) — the truth tests compare answers with;
* ``progress.json``: what the query reported in-process (``query.recentProgress``).

The stories each pipeline was built for are in its data function's docstring. A developer tool:
``python sample_checkpoints/pipelines.py [name ...]`` (CI reads the committed folders)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from generate import (  # noqa: E402
    Rows,
    Scenario,
    _reader,
    event_log_conf,
    json_default,
    start_spark,
    ts,
    write_inputs,
)

PIPELINES = HERE / "pipelines"

# --------------------------------------------------------------------------- data


def ad_campaigns_batches(n_batches: int = 16) -> list[dict[str, Rows]]:
    """Impressions and clicks: clicks filtered (``is_bot = false``), deduplicated by click id within
    a 5 minute watermark (operator 2), joined to impressions within 10 minutes after them (operator 1),
    counted per campaign in 10-minute windows (operator 0) into a Parquet file sink.

    Batch ``b`` is at minute ``3b``: impressions of ``camp-a`` and ``camp-b`` each clicked a minute
    later in the same batch (written). Stories, by campaign (clicks carry no campaign: a click
    belongs to a campaign through its impression's ``ad_id``):

    * ``camp-dup``: impression ``ad-dup`` at 00:06 (batch 2); its click reuses the click id ``c-1`` of
      a click of ``camp-other`` read in batch 0: dropped as a duplicate by operator 2 in batch 2, so
      the impression never matched (lost);
    * ``camp-late``: impression ``ad-late`` at 00:18 (batch 6); its click (00:19) arrives in batch 11,
      behind the watermark: dropped as late by operator 2 (lost);
    * ``camp-bot``: impression ``ad-bot`` at 00:09 (batch 3); its only click is a bot's: filtered (lost);
    * ``camp-nullbot``: impression ``ad-nullbot`` at 00:09 (batch 3); its click has no ``is_bot``:
      filtered by ``isnotnull`` (lost);
    * ``camp-far``: impression ``ad-far`` at 00:12 (batch 4), its click 13 minutes later (batch 8):
      both held, the join's time range rejects the pair (lost);
    * ``camp-none``: an impression (batch 5) with no click in the input at all (lost);
    * ``camp-part``: one impression clicked (batch 1, written) and one never clicked (batch 7): partly written;
    * ``camp-wait``: impression and click in the last batch: joined, its window still open (waiting);
    * ``camp-trail `` (a trailing space) and ``CAMP-CASE``: clicked and written in batch 5's windows:
      what a user typing ``camp-trail`` or ``camp-case`` finds as near misses.
    """
    out = []
    last = n_batches - 1
    for b in range(n_batches):
        imps: Rows = []
        clicks: Rows = []

        def imp(ad: str, campaign: str, t: str, imps: Rows = imps) -> None:
            imps.append({"impression_id": f"imp-{ad}", "ad_id": ad, "campaign": campaign, "impression_time": t})

        def click(click_id: str, ad: str, t: str, is_bot: bool | None = False, clicks: Rows = clicks) -> None:
            row: dict[str, Any] = {"click_id": click_id, "ad_id": ad, "click_time": t}
            if is_bot is not None:
                row["is_bot"] = is_bot
            clicks.append(row)

        for c in ("a", "b"):
            imp(f"ad-{c}-{b}", f"camp-{c}", ts(3 * b, 10))
            click(f"c-{c}-{b}", f"ad-{c}-{b}", ts(3 * b + 1, 10))
        if b == 0:
            imp("ad-other", "camp-other", ts(0, 30))
            click("c-1", "ad-other", ts(1, 30))
        if b == 1:
            imp("ad-part-1", "camp-part", ts(3, 40))
            click("c-part-1", "ad-part-1", ts(4, 40))
        if b == 2:
            imp("ad-dup", "camp-dup", ts(6, 20))
            click("c-1", "ad-dup", ts(7, 20))  # the click id of batch 0's click: a duplicate
        if b == 3:
            imp("ad-bot", "camp-bot", ts(9, 30))
            click("c-bot", "ad-bot", ts(10, 30), is_bot=True)
            imp("ad-nullbot", "camp-nullbot", ts(9, 40))
            click("c-nullbot", "ad-nullbot", ts(10, 40), is_bot=None)
        if b == 4:
            imp("ad-far", "camp-far", ts(12, 20))
        if b == 5:
            imp("ad-none", "camp-none", ts(15, 20))
            imp("ad-trail", "camp-trail ", ts(15, 30))
            click("c-trail", "ad-trail", ts(16, 30))
            imp("ad-case", "CAMP-CASE", ts(15, 40))
            click("c-case", "ad-case", ts(16, 40))
        if b == 6:
            imp("ad-late", "camp-late", ts(18, 20))
        if b == 7:
            imp("ad-part-2", "camp-part", ts(21, 40))
        if b == 8:
            click("c-far", "ad-far", ts(25, 20))  # 13 minutes after its impression: outside the range
        if b == 11:
            click("c-late", "ad-late", ts(19, 20))  # behind the watermark by now
        if b == last:
            imp("ad-wait", "camp-wait", ts(3 * b, 30))
            click("c-wait", "ad-wait", ts(3 * b + 1, 30))
        out.append({"impressions": imps, "clicks": clicks})
    return out


def sessions_batches(n_batches: int = 12) -> list[dict[str, Rows]]:
    """Page views per user in session windows (10 minute gap, 5 minute watermark, append) into a JSON
    file sink; health checks (``page`` starting ``/health``) are filtered out first.

    Batch ``b`` is at minute ``4b``: ``u-busy`` views a page in every batch (one session, open to
    the end: waiting). Stories:

    * ``u-closed``: views at 00:00, 00:04 and 00:08 (batches 0-2): one session, closed and written;
    * ``u-two``: views at 00:04 and 00:32: two sessions, both written;
    * ``u-late``: a view at 00:02 read in batch 7: its session (00:02-00:12) ends before the late-row
      watermark (batch 6's, 00:15): dropped as late;
    * ``u-mixed``: a view at 00:16 (batch 4, written) and one at 00:03 read in batch 9 (late):
      partly written;
    * ``u-health``: only ``/health`` checks: filtered;
    * ``u-open``: views in the last two batches: its session is open (waiting, with the
      watermark that closes it).
    """
    out = []
    last = n_batches - 1
    for b in range(n_batches):
        rows: Rows = []

        def view(user: str, page: str, t: str, rows: Rows = rows) -> None:
            rows.append({"user_id": user, "page": page, "event_time": t})

        view("u-busy", f"/p/{b}", ts(4 * b, 5))
        if b in (0, 1, 2):
            view("u-closed", "/home", ts(4 * b))
        if b == 1:
            view("u-two", "/home", ts(4, 20))
        if b == 8:
            view("u-two", "/cart", ts(32, 20))
        if b == 3:
            view("u-health", "/health/live", ts(12, 30))
        if b == 4:
            view("u-mixed", "/home", ts(16, 10))
        if b == 7:
            view("u-late", "/home", ts(2))
        if b == 9:
            view("u-mixed", "/cart", ts(3))
        if b in (last - 1, last):
            view("u-open", "/home", ts(4 * b, 40))
        out.append({"views": rows})
    return out


def rollup_batches(n_batches: int = 16) -> list[dict[str, Rows]]:
    """Purchases (``kind IN ('buy', 'refund')``; views are filtered out) summed per user in 5-minute
    windows (operator 1), then the 5-minute totals summed per user in 15-minute windows over the
    windows' time (operator 0), 5 minute watermark, append, foreachBatch.

    Batch ``b`` is at minute ``3b``: ``u-steady`` buys in every batch. Stories:

    * ``u-full``: buys at 00:01, 00:06 and 00:11 (batches 0-3): three 5-minute windows, one
      15-minute window, written;
    * ``u-late``: a buy at 00:02 read in batch 8: dropped as late by operator 1;
    * ``u-second``: a buy at 00:16 (batch 5, counted) and a refund at 00:17 read in batch 11, after
      its 5-minute window was emitted (batch 10): dropped as late; partly written;
    * ``u-viewer``: views only: filtered;
    * ``u-wait15``: a buy at 00:31 (batch 10): its 5-minute window goes on to operator 0 in batch 15,
      where its 15-minute window (00:30-00:45) is still open at the end (waiting).
    """
    out = []
    for b in range(n_batches):
        rows: Rows = []

        def ev(user: str, kind: str, amount: int, t: str, rows: Rows = rows) -> None:
            rows.append({"user_id": user, "kind": kind, "amount": amount, "event_time": t})

        ev("u-steady", "buy", 10, ts(3 * b, 5))
        if b in (0, 2, 3):
            ev("u-full", "buy", 5, ts({0: 1, 2: 6, 3: 11}[b]))
        if b == 8:
            ev("u-late", "buy", 7, ts(2))
        if b == 5:
            ev("u-second", "buy", 3, ts(16))
        if b == 10:
            ev("u-wait15", "buy", 4, ts(31))
        if b == 11:
            ev("u-second", "refund", -1, ts(17))
        if b == 4:
            ev("u-viewer", "view", 0, ts(12))
        out.append({"purchases": rows})
    return out


def shipments_batches(n_batches: int = 16) -> list[dict[str, Rows]]:
    """Orders (CSV; ``cast(amount as double) >= 1``) LEFT OUTER JOIN shipments within 10 minutes after the
    order (operator 1), 5 minute watermarks; then orders and shipped orders per store in 10-minute
    windows of the order time (operator 0), append, into a Parquet file sink.

    Batch ``b`` is at minute ``3b``: ``ord-<b>`` of ``store-1`` shipped 2 minutes later (written).
    Stories:

    * ``ord-unshipped`` (store-2, batch 1): never shipped: emitted null-padded by the join when
      evicted, then counted and written (written unmatched);
    * ``ord-lateship`` (store-2, batch 2): its shipment (00:08) arrives in batch 12, after the order
      was emitted null-padded: dropped as late; the order is written unmatched;
    * ``ord-free`` (store-3, batch 3): amount 0: filtered;
    * ``ord-wait`` (store-3, the last batch): no shipment yet: waiting in the join's state.
    """
    out = []
    last = n_batches - 1
    for b in range(n_batches):
        orders: Rows = []
        ships: Rows = []

        def order(oid: str, store: str, amount: str, t: str, orders: Rows = orders) -> None:
            orders.append({"order_id": oid, "store": store, "amount": amount, "order_time": t})

        def ship(oid: str, t: str, ships: Rows = ships) -> None:
            ships.append({"shipment_id": f"s-{oid}", "order_id": oid, "ship_time": t})

        order(f"ord-{b}", "store-1", "12.50", ts(3 * b, 10))
        ship(f"ord-{b}", ts(3 * b + 2, 10))
        if b == 1:
            order("ord-unshipped", "store-2", "30", ts(3, 30))
        if b == 2:
            order("ord-lateship", "store-2", "8", ts(6, 30))
        if b == 12:
            ship("ord-lateship", ts(8, 30))
        if b == 3:
            order("ord-free", "store-3", "0.40", ts(9, 30))
            ship("ord-free", ts(10, 30))
        if b == last:
            order("ord-wait", "store-3", "5", ts(3 * b, 40))
        out.append({"orders": orders, "shipments": ships})
    return out


def timeouts_batches(n_batches: int = 12) -> list[dict[str, Rows]]:
    """Events per user in applyInPandasWithState with an event-time timeout 10 minutes after the
    user's last event (5 minute watermark, append): the function writes one summary row per user
    when its state times out, into a Parquet file sink.

    Batch ``b`` is at minute ``3b``: ``u-steady`` sends an event in every batch (never times out:
    waiting). Stories:

    * ``u-done``: events at 00:00 and 00:03 (batches 0-1), then quiet: timed out and written;
    * ``u-late``: one event at 00:02 read in batch 8: dropped as late;
    * ``u-back``: events in batch 0 (times out, written), and again from batch 9 (waiting): partly
      written.
    """
    out = []
    for b in range(n_batches):
        rows: Rows = [{"user_id": "u-steady", "value": 1, "event_time": ts(3 * b, 5)}]
        if b in (0, 1):
            rows.append({"user_id": "u-done", "value": 2, "event_time": ts(3 * b)})
        if b == 8:
            rows.append({"user_id": "u-late", "value": 3, "event_time": ts(2)})
        if b == 0 or b >= 9:
            rows.append({"user_id": "u-back", "value": 4, "event_time": ts(3 * b, 20)})
        out.append({"events": rows})
    return out


# --------------------------------------------------------------------------- queries


def ad_campaigns(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, expr, window

    clicks = (
        s["clicks"]
        .where(col("is_bot") == False)  # noqa: E712  (Spark's column comparison)
        .withWatermark("click_time", "5 minutes")
        .dropDuplicatesWithinWatermark(["click_id"])
    )
    imps = s["impressions"].withWatermark("impression_time", "5 minutes")
    joined = imps.alias("i").join(
        clicks.alias("c"),
        expr(
            "i.ad_id = c.ad_id AND c.click_time >= i.impression_time AND c.click_time <= i.impression_time + INTERVAL 10 MINUTES"
        ),
        "inner",
    )
    return joined.groupBy(window(col("i.impression_time"), "10 minutes"), col("i.campaign")).agg(count("*").alias("clicks"))


def sessions(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, session_window
    from pyspark.sql.functions import max as max_

    return (
        s["views"]
        .where(~col("page").like("/health%"))
        .withWatermark("event_time", "5 minutes")
        .groupBy(session_window(col("event_time"), "10 minutes"), col("user_id"))
        .agg(count("*").alias("views"), max_("page").alias("last_page"))
    )


def rollup(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, window, window_time
    from pyspark.sql.functions import sum as sum_

    five = (
        s["purchases"]
        .where(col("kind").isin("buy", "refund"))
        .withWatermark("event_time", "5 minutes")
        .groupBy(window(col("event_time"), "5 minutes"), col("user_id"))
        .agg(sum_("amount").alias("amount"))
    )
    return five.groupBy(window(window_time(col("window")), "15 minutes"), col("user_id")).agg(
        sum_("amount").alias("amount"), count("*").alias("windows")
    )


def shipments(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, expr, window

    orders = s["orders"].where(col("amount").cast("double") >= 1).withWatermark("order_time", "5 minutes")
    ships = s["shipments"].withWatermark("ship_time", "5 minutes")
    joined = orders.alias("o").join(
        ships.alias("s"),
        expr("o.order_id = s.order_id AND s.ship_time >= o.order_time AND s.ship_time <= o.order_time + INTERVAL 10 MINUTES"),
        "left_outer",
    )
    return joined.groupBy(window(col("o.order_time"), "10 minutes"), col("o.store")).agg(
        count("*").alias("orders"), count(col("s.shipment_id")).alias("shipped")
    )


def timeouts(_spark: Any, s: dict[str, Any]) -> Any:
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def summarise(key: tuple[Any, ...], pdfs: Any, state: Any) -> Any:
        if state.hasTimedOut:
            (events, total, last) = state.get
            state.remove()
            yield pd.DataFrame({"user_id": [key[0]], "events": [events], "total": [total], "last_ms": [last]})
            return
        events, total, last = state.get if state.exists else (0, 0, 0)
        for pdf in pdfs:
            events += len(pdf)
            total += int(pdf["value"].sum())
            last = max(last, int(pdf["event_time"].max().timestamp() * 1000))
        state.update((events, total, last))
        state.setTimeoutTimestamp(last + 10 * 60 * 1000)
        yield pd.DataFrame({"user_id": [], "events": [], "total": [], "last_ms": []}).astype(
            {"user_id": str, "events": "int64", "total": "int64", "last_ms": "int64"}
        )

    return (
        s["events"]
        .withWatermark("event_time", "5 minutes")
        .groupBy("user_id")
        .applyInPandasWithState(
            summarise,
            "user_id STRING, events LONG, total LONG, last_ms LONG",
            "events LONG, total LONG, last_ms LONG",
            "append",
            GroupStateTimeout.EventTimeTimeout,
        )
    )


SMALL = {"spark.sql.shuffle.partitions": "4"}
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKS = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
}


def pipelines() -> list[Scenario]:
    return [
        Scenario(
            "ad_campaigns",
            "clicks filtered (is_bot = false) -> dropDuplicatesWithinWatermark(click_id) -> inner time-range join "
            "with impressions -> 10-minute windows per campaign -> Parquet file sink (RocksDB).",
            {
                "impressions": "impression_id STRING, ad_id STRING, campaign STRING, impression_time TIMESTAMP",
                "clicks": "click_id STRING, ad_id STRING, is_bot BOOLEAN, click_time TIMESTAMP",
            },
            ad_campaigns_batches(),
            ad_campaigns,
            conf={**SMALL, **ROCKS},
            event_log="zstd",
            sink="parquet",
        ),
        Scenario(
            "user_sessions",
            "page views without health checks -> session windows per user (10 minute gap) -> JSON file sink.",
            {"views": "user_id STRING, page STRING, event_time TIMESTAMP"},
            sessions_batches(),
            sessions,
            conf={**SMALL, "spark.sql.streaming.stateStore.providerClass": HDFS},
            event_log="zstd",
            sink="json",
        ),
        Scenario(
            "window_rollup",
            "purchases (kind IN ('buy', 'refund')) -> 5-minute sums per user -> 15-minute sums of them per user "
            "(window -> window) -> foreachBatch.",
            {"purchases": "user_id STRING, kind STRING, amount BIGINT, event_time TIMESTAMP"},
            rollup_batches(),
            rollup,
            conf=SMALL,
            event_log="zstd",
        ),
        Scenario(
            "orders_shipments",
            "orders (CSV, cast(amount as double) >= 1) LEFT OUTER JOIN shipments -> orders per store in 10-minute "
            "windows -> Parquet file sink.",
            {
                "orders": "order_id STRING, store STRING, amount STRING, order_time TIMESTAMP",
                "shipments": "shipment_id STRING, order_id STRING, ship_time TIMESTAMP",
            },
            shipments_batches(),
            shipments,
            conf={**SMALL, **ROCKS},
            event_log="zstd",
            formats={"orders": "csv"},
            sink="parquet",
        ),
        Scenario(
            "user_timeouts",
            "applyInPandasWithState per user with an event-time timeout, a summary row per timed-out user -> Parquet file sink.",
            {"events": "user_id STRING, value BIGINT, event_time TIMESTAMP"},
            timeouts_batches(),
            timeouts,
            conf=SMALL,
            event_log="zstd",
            sink="parquet",
        ),
    ]


# --------------------------------------------------------------------------- runner


def sink_rows(out: Path, fmt: str) -> list[dict[str, Any]]:
    """What a file sink wrote, per batch: the files each ``_spark_metadata/<batch>`` lists, read back."""
    import pyarrow.parquet as pq

    rows = []
    seen: set[str] = set()
    logs = [p for p in (out / "_spark_metadata").iterdir() if p.name.split(".")[0].isdigit()]
    for log in sorted(logs, key=lambda p: int(p.name.split(".")[0])):
        batch = int(log.name.split(".")[0])
        for line in log.read_text().splitlines()[1:]:
            name = json.loads(line)["path"].rsplit("/", 1)[-1]
            if name in seen:
                continue
            seen.add(name)
            if fmt == "parquet":
                found = pq.read_table(out / name).to_pylist()
            else:
                found = [json.loads(x) for x in (out / name).read_text().splitlines() if x.strip()]
            rows += [{"batch_id": batch, "file": name, **r} for r in found]
    return rows


def _copy(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest)
    for p in src.rglob("*"):  # the file source orders files by modification time: keep them
        st = p.stat()
        os.utime(dest / p.relative_to(src), (st.st_atime, st.st_mtime))


def run(s: Scenario) -> None:
    dest = PIPELINES / s.name
    with tempfile.TemporaryDirectory(prefix=f"statelens-pipeline-{s.name}-") as tmp:
        root = Path(tmp)
        inputs, out, logs, cp = root / "inputs", root / "sink", root / "event_log", root / "checkpoint"
        logs.mkdir()
        write_inputs(inputs, s)
        spark = start_spark({**event_log_conf(s.event_log or "plain", str(logs)), **s.conf})
        try:
            streams = {src: _reader(spark, s, src, ddl, inputs / src) for src, ddl in s.schemas.items()}
            df = s.build(spark, streams)
            emitted: list[dict[str, Any]] = []

            def collect(batch_df: Any, batch_id: int) -> None:
                emitted.extend({"batch_id": batch_id, **r.asDict(recursive=True)} for r in batch_df.collect())

            writer = df.writeStream.outputMode(s.output_mode).option("checkpointLocation", str(cp))
            if s.sink in ("parquet", "json"):
                writer = writer.format(s.sink).option("path", str(out))
            else:
                writer = writer.foreachBatch(collect)
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination()
            if query.exception():
                raise RuntimeError(str(query.exception()))
            progress = [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]
        finally:
            spark.stop()
        if s.sink in ("parquet", "json"):
            emitted = sink_rows(out, s.sink)
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for part in (cp, inputs, logs) + ((out,) if s.sink in ("parquet", "json") else ()):
            _copy(part, dest / part.name)
    emitted.sort(key=lambda r: json.dumps(r, sort_keys=True, default=json_default))
    (dest / "emitted.json").write_text(json.dumps(emitted, indent=1, default=json_default, sort_keys=True) + "\n")
    (dest / "progress.json").write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")
    print(f"{s.name}: {len(s.batches)} input batches, {len(emitted)} output rows", flush=True)


def main(argv: list[str]) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    for s in pipelines():
        if not argv or s.name in argv:
            run(s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
