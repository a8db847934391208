"""Generate the bundled sample checkpoints by running real Structured Streaming queries.

Every scenario writes deterministic JSON input files (one file per micro-batch, with
explicit modification times because the file source orders files by mtime), runs its
query on local Spark with ``Trigger.AvailableNow`` and ``maxFilesPerTrigger=1`` (so input
file *i* is micro-batch *i*), and leaves behind:

* ``sample_checkpoints/<scenario>/``          the checkpoint (what State Lens opens)
* ``sample_checkpoints/outputs/<scenario>.json`` the rows the query emitted (ground truth
  for tests: which orders really joined, which windows were emitted ...)

Usage::

    python sample_checkpoints/generate.py            # every scenario
    python sample_checkpoints/generate.py join_hdfs  # only some
    python sample_checkpoints/generate.py --spark 3.5.9|all [scenario ...]  # compatibility samples

Batch timestamps are wall clock, everything else (keys, event times, watermarks,
batch boundaries) is the same on every run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUTS = HERE / "outputs"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

Rows = list[dict[str, Any]]


def ts(minutes: float = 0, seconds: float = 0) -> str:
    return (T0 + dt.timedelta(minutes=minutes, seconds=seconds)).isoformat()


@dataclass
class Scenario:
    name: str
    description: str
    schemas: dict[str, str]  # source name -> DDL schema
    batches: list[dict[str, Rows]]  # per micro-batch: source name -> rows
    build: Callable[[Any, dict[str, Any]], Any]  # (spark, {source: streaming df}) -> df
    output_mode: str = "append"
    conf: dict[str, str] = field(default_factory=dict)
    # Spark event log written beside the sample (event_logs/<name>/): "plain", "zstd", "lz4",
    # "snappy" (one file each) or "rolling" (an eventlog_v2_* folder); None writes none. A sample
    # with an event log keeps its input files too (inputs/<name>/<source>/), for whole-query answers
    event_log: str | None = None
    formats: dict[str, str] = field(default_factory=dict)  # source -> json (default) | csv | parquet
    sink: str = "foreachBatch"  # or "parquet": a file sink, kept in sinks/<name>/ with its _spark_metadata


# --------------------------------------------------------------------------- data


def orders_payments_batches(n_batches: int = 16, per_batch: int = 10) -> list[dict[str, Rows]]:
    """The orders / payments streams of the State Reader blog, as files.

    Order ``n`` is placed in batch ``n // per_batch`` at minute ``batch`` (+5 s per order).
    Its payment depends on ``n % 10``:

    0  payment for ``missing-n``: an order that never exists
    1  payment for ``ord-(n+5)``: points to another order (that order gets two payments)
    2  payment for ``ord-(n+10)``, i.e. it arrives one batch before its order
    3  payment 8 minutes *before* the order: behind the watermark, dropped as late data
    4  payment 8 minutes *after* the order: both sides in state, time condition fails
    5  payment for ``ORD-n``: a malformed key (upper case), a near miss
    7  the order is cancelled and filtered out upstream; only its payment reaches the join
    9  the order is sent twice (two rows for one key: index 0 and 1)
    6, 8  normal: they match
    """
    batches = []
    for b in range(n_batches):
        orders: Rows = []
        payments: Rows = []
        for i in range(per_batch):
            n = b * per_batch + i
            t = ts(b, 5 * i)
            order = {
                "order_id": f"ord-{n}",
                "customer_id": f"cust-{n % 5}",
                "amount": round(10 + (n * 7.3) % 90, 2),
                "status": "cancelled" if n % 10 == 7 else "placed",
                "order_time": t,
            }
            orders.append(order)
            if n % 10 == 9:
                orders.append(dict(order, amount=order["amount"] + 1))
            case = n % 10
            pay_order, pay_time = f"ord-{n}", t
            if case == 0:
                pay_order = f"missing-{n}"
            elif case == 1:
                pay_order = f"ord-{n + 5}"
            elif case == 2:
                pay_order = f"ord-{n + 10}"
            elif case == 3:
                pay_time = ts(b - 8, 5 * i)
            elif case == 4:
                pay_time = ts(b + 8, 5 * i)
            elif case == 5:
                pay_order = f"ORD-{n}"
            payments.append(
                {
                    "payment_id": f"pmt-{n}",
                    "order_id": pay_order,
                    "payment_amount": round(10 + (n * 3.1) % 90, 2),
                    "payment_time": pay_time,
                }
            )
        batches.append({"orders": orders, "payments": payments})
    return batches


ORDERS = "order_id STRING, customer_id STRING, amount DOUBLE, status STRING, order_time TIMESTAMP"
PAYMENTS = "payment_id STRING, order_id STRING, payment_amount DOUBLE, payment_time TIMESTAMP"
EVENTS = "event_id STRING, user_id STRING, kind STRING, value BIGINT, event_time TIMESTAMP"
IMPRESSIONS = "impression_id STRING, ad_id STRING, campaign STRING, impression_time TIMESTAMP"
CLICKS = "click_id STRING, ad_id STRING, click_time TIMESTAMP"


def orders_payments_join(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, expr

    orders = s["orders"].where(col("status") != "cancelled").withWatermark("order_time", "2 minutes")
    payments = s["payments"].withWatermark("payment_time", "2 minutes")
    joined = orders.alias("o").join(
        payments.alias("p"),
        expr(
            "o.order_id = p.order_id AND "
            "o.order_time >= p.payment_time - INTERVAL 5 MINUTES AND "
            "o.order_time <= p.payment_time + INTERVAL 5 MINUTES"
        ),
        "inner",
    )
    return joined.select("o.*", "p.payment_id", "p.payment_amount", "p.payment_time")


def event_batches(
    n_batches: int,
    per_batch: int,
    minutes_per_batch: float,
    users: int = 5,
    id_fn: Callable[[int, int, int], str] | None = None,
    time_fn: Callable[[int, int], str] | None = None,
    idle_after: dict[str, int] | None = None,
) -> list[dict[str, Rows]]:
    """``idle_after``: user -> last batch with events for that user (then the user goes quiet)."""
    out = []
    kinds = ["click", "view", "buy"]
    for b in range(n_batches):
        rows = []
        for i in range(per_batch):
            n = b * per_batch + i
            if idle_after and b > idle_after.get(f"user-{n % users}", n_batches):
                continue
            rows.append(
                {
                    "event_id": id_fn(b, i, n) if id_fn else f"ev-{n}",
                    "user_id": f"user-{n % users}",
                    "kind": kinds[n % 3],
                    "value": n % 7 + 1,
                    "event_time": time_fn(b, i) if time_fn else ts(b * minutes_per_batch, 7 * i),
                }
            )
        out.append({"events": rows})
    return out


def with_late_events(batches: list[dict[str, Rows]], late: dict[int, int], minutes_behind: float) -> list[dict[str, Rows]]:
    """Add ``late[b]`` events to batch ``b``, ``minutes_behind`` minutes older than the batch's first
    event: far behind the watermark, so the query drops them (numRowsDroppedByWatermark)."""
    out = []
    for b, batch in enumerate(batches):
        rows = list(batch["events"])
        t0 = dt.datetime.fromisoformat(rows[0]["event_time"]) - dt.timedelta(minutes=minutes_behind)
        for k in range(late.get(b, 0)):
            rows.append(
                {
                    "event_id": f"late-{b}-{k}",
                    "user_id": f"user-{k}",
                    "kind": "click",
                    "value": 1,
                    "event_time": (t0 + dt.timedelta(seconds=k)).isoformat(),
                }
            )
        out.append({"events": rows})
    return out


def dedup_ids(b: int, i: int, n: int) -> str:
    # every third event repeats an id of the previous batch: a duplicate to drop
    return f"ev-{n - 10}" if b > 0 and i % 3 == 0 else f"ev-{n}"


def session_batches() -> list[dict[str, Rows]]:
    """Users with bursts of activity separated by idle gaps longer or shorter than 15 min."""
    out = []
    for b in range(12):
        rows = []
        for u in range(4):
            # user-0 is always active (one long session); user-1 pauses 20 min every 4 batches;
            # user-2 shows up every 3rd batch only (new session each time); user-3 only early.
            active = {0: True, 1: b % 4 != 3, 2: b % 3 == 0, 3: b < 3}[u]
            if not active:
                continue
            for k in range(2):
                rows.append(
                    {
                        "event_id": f"ev-{b}-{u}-{k}",
                        "user_id": f"user-{u}",
                        "kind": "view",
                        "value": 1,
                        "event_time": ts(b * 10 + k * 3 + u),
                    }
                )
        out.append({"events": rows})
    return out


def hot_key_batches() -> list[dict[str, Rows]]:
    """One join key ('hot') holds most of the left state; 40 other keys hold one row each."""
    out = []
    for b in range(6):
        left = [{"k": "hot", "v": f"l-{b}-{i}", "t": ts(b)} for i in range(250)]
        left += [{"k": f"key-{b * 8 + i}", "v": f"l-{b}-c{i}", "t": ts(b)} for i in range(8)]
        right = [{"k": f"key-{b * 8 + i}", "v": f"r-{b}-{i}", "t": ts(b)} for i in range(0, 8, 2)]
        if b == 0:
            right.append({"k": "hot", "v": "r-hot", "t": ts(b)})
        out.append({"left": left, "right": right})
    return out


def chain_batches(n_batches: int = 14) -> list[dict[str, Rows]]:
    """Events for dropDuplicates(event_id) -> 5-minute windows per user (10 minute watermark).

    Batch ``b`` holds one event per user-0..3 at minute ``2b`` (+7 s per user), and these stories:

    * ``user-late``: one event 1 minute into the stream, arriving in batch 10: behind the
      watermark, dropped by the dedup (the first operator), never counted;
    * ``user-second``: an event at 00:02:30 in batch 1, counted in window 00:00-00:05 (emitted in
      batch 9), and a second event at 00:03:00 arriving in batch 10, after its window was emitted:
      dropped as late, so the emitted count is one short;
    * ``user-dup``: event ``ev-dup-1`` in batch 2 and again in batch 3 (dropped as a duplicate of
      the first), ``ev-dup-2`` twice within batch 4 (the second dropped);
    * ``User-7`` and ``user-8 `` (a trailing space): keys a user would type as ``user-7`` / ``user-8``;
    * ``user-test``: one event of kind ``test``, which the query filters out before the dedup.
    """
    out = []
    for b in range(n_batches):
        rows = [
            {"event_id": f"ev-{b}-{u}", "user_id": f"user-{u}", "kind": "view", "value": 1, "event_time": ts(2 * b, 7 * u)}
            for u in range(4)
        ]

        def story(event_id: str, user: str, t: str, kind: str = "view", rows: Rows = rows) -> None:
            rows.append({"event_id": event_id, "user_id": user, "kind": kind, "value": 1, "event_time": t})

        if b == 1:
            story("ev-second-a", "user-second", ts(2, 30))
        if b == 10:
            story("ev-late", "user-late", ts(1))
            story("ev-second-b", "user-second", ts(3))
        if b == 2:
            story("ev-dup-1", "user-dup", ts(4, 10))
        if b == 3:
            story("ev-dup-1", "user-dup", ts(6, 10))
        if b == 4:
            story("ev-dup-2", "user-dup", ts(8, 5))
            story("ev-dup-2", "user-dup", ts(8, 5))
        if b == 5:
            story("ev-case", "User-7", ts(10, 40))
            story("ev-space", "user-8 ", ts(10, 50))
        if b == 6:
            story("ev-test", "user-test", ts(12, 40), kind="test")
        out.append({"events": rows})
    return out


def clicks_batches(n_batches: int = 12) -> list[dict[str, Rows]]:
    """Ad impressions (JSON) and clicks (Parquet) for a left outer join: a click counts when it
    comes within 10 minutes after its impression; 2 minute watermarks on both.

    Batch ``b`` shows ``ad-b-0`` .. ``ad-b-2`` at minute ``2b``: ``ad-b-0`` is clicked 3 minutes later
    (the click arrives in the next batch), ``ad-b-1`` never, ``ad-b-2`` 1 minute later in the same
    batch. Stories:

    * ``ad-late-click``: shown at 00:02:30 (batch 1), clicked at 00:04:30, but the click only
      arrives in batch 10, after the impression was emitted null-padded: dropped as late;
    * ``ad-far-click``: shown at 00:02:40 (batch 1), clicked at 00:18:40, 16 minutes later
      (the bound is 10), arriving in batch 9: both held, the condition rejects the pair;
    * ``ad-waiting``: shown in the last batch, no click yet: waits in state.
    """
    out = []
    for b in range(n_batches):
        imps = [
            {"impression_id": f"imp-{b}-{i}", "ad_id": f"ad-{b}-{i}", "campaign": f"c-{i}", "impression_time": ts(2 * b, 10 * i)}
            for i in range(3)
        ]
        clicks = [{"click_id": f"clk-{b}-2", "ad_id": f"ad-{b}-2", "click_time": ts(2 * b + 1, 20)}]
        if b > 0:
            clicks.append({"click_id": f"clk-{b - 1}-0", "ad_id": f"ad-{b - 1}-0", "click_time": ts(2 * (b - 1) + 3)})
        if b == 1:
            imps.append(
                {"impression_id": "imp-late-click", "ad_id": "ad-late-click", "campaign": "c-9", "impression_time": ts(2, 30)}
            )
            imps.append(
                {"impression_id": "imp-far-click", "ad_id": "ad-far-click", "campaign": "c-9", "impression_time": ts(2, 40)}
            )
        if b == 9:
            clicks.append({"click_id": "clk-far", "ad_id": "ad-far-click", "click_time": ts(18, 40)})
        if b == 10:
            clicks.append({"click_id": "clk-late", "ad_id": "ad-late-click", "click_time": ts(4, 30)})
        if b == n_batches - 1:
            imps.append(
                {"impression_id": "imp-waiting", "ad_id": "ad-waiting", "campaign": "c-9", "impression_time": ts(2 * b, 50)}
            )
        out.append({"impressions": imps, "clicks": clicks})
    return out


def sink_batches(n_batches: int = 9) -> list[dict[str, Rows]]:
    """Events as CSV for 5-minute windows per user written to a Parquet file sink: batch ``b`` at
    minute ``3b``; ``user-late`` sends one event 20 minutes old in batch 7 (dropped as late)."""
    out = event_batches(n_batches, 6, 3, users=3)
    out[7]["events"].append({"event_id": "ev-late", "user_id": "user-late", "kind": "click", "value": 1, "event_time": ts(1)})
    return out


# --------------------------------------------------------------------------- queries


def windowed_agg(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, window
    from pyspark.sql.functions import sum as sum_

    return (
        s["events"]
        .withWatermark("event_time", "10 minutes")
        .groupBy(window(col("event_time"), "5 minutes"), col("user_id"))
        .agg(count("*").alias("events"), sum_("value").alias("total_value"))
    )


def dedup(_spark: Any, s: dict[str, Any]) -> Any:
    return s["events"].withWatermark("event_time", "10 minutes").dropDuplicates(["event_id", "event_time"])


def dedup_within_watermark(_spark: Any, s: dict[str, Any]) -> Any:
    return s["events"].withWatermark("event_time", "10 minutes").dropDuplicatesWithinWatermark(["event_id"])


def session_windows(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, session_window

    return (
        s["events"]
        .withWatermark("event_time", "30 minutes")
        .groupBy(col("user_id"), session_window(col("event_time"), "15 minutes"))
        .agg(count("*").alias("events"))
    )


def apply_in_pandas_with_state(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count_user(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        if state.hasTimedOut:
            (count, last_ms) = state.get
            state.remove()
            yield pd.DataFrame({"user_id": [key[0]], "events": [count], "status": ["expired"]})
            return
        count, last_ms = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            count += len(pdf)
            last_ms = max(last_ms, int(pdf["event_time"].max().timestamp() * 1000))
        state.update((count, last_ms))
        # expire a user 10 minutes (event time) after their last event
        state.setTimeoutTimestamp(last_ms + 10 * 60 * 1000)
        yield pd.DataFrame({"user_id": [key[0]], "events": [count], "status": ["active"]})

    return (
        s["events"]
        .withWatermark("event_time", "5 minutes")
        .groupBy("user_id")
        .applyInPandasWithState(
            count_user,
            outputStructType="user_id STRING, events LONG, status STRING",
            stateStructType="events LONG, last_event_ms LONG",
            outputMode="update",
            timeoutConf=GroupStateTimeout.EventTimeTimeout,
        )
    )


def transform_with_state(_spark: Any, s: dict[str, Any]) -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    class UserActivity(StatefulProcessor):
        """Per user: a value state (event count), a list state (last events), a map state
        (count per kind) and an event-time timer 15 minutes after the last event."""

        def init(self, handle: StatefulProcessorHandle) -> None:
            self.handle = handle
            self.count = handle.getValueState("count", StructType([StructField("n", LongType())]))
            self.recent = handle.getListState(
                "recent", StructType([StructField("event_id", StringType()), StructField("ms", LongType())])
            )
            self.per_kind = handle.getMapState(
                "per_kind", StructType([StructField("kind", StringType())]), StructType([StructField("n", LongType())])
            )

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            n = self.count.get()[0] if self.count.exists() else 0
            last_ms = 0
            for pdf in rows:
                n += len(pdf)
                for event_id, kind, t in zip(pdf["event_id"], pdf["kind"], pdf["event_time"], strict=True):
                    ms = int(pd.Timestamp(t).timestamp() * 1000)
                    last_ms = max(last_ms, ms)
                    self.recent.appendValue((event_id, ms))
                    prev = self.per_kind.getValue((kind,))[0] if self.per_kind.containsKey((kind,)) else 0
                    self.per_kind.updateValue((kind,), (prev + 1,))
            self.count.update((n,))
            for old in self.handle.listTimers():
                self.handle.deleteTimer(old)
            self.handle.registerTimer(last_ms + 15 * 60 * 1000)
            yield pd.DataFrame({"user_id": [key[0]], "events": [n], "status": ["active"]})

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
            n = self.count.get()[0] if self.count.exists() else 0
            self.count.clear()
            self.recent.clear()
            self.per_kind.clear()
            yield pd.DataFrame({"user_id": [key[0]], "events": [n], "status": ["expired"]})

        def close(self) -> None:
            pass

    return (
        s["events"]
        .withWatermark("event_time", "5 minutes")
        .groupBy("user_id")
        .transformWithStateInPandas(
            statefulProcessor=UserActivity(),
            outputStructType="user_id STRING, events LONG, status STRING",
            outputMode="Update",
            timeMode="EventTime",
        )
    )


def chained_join_agg(spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, window
    from pyspark.sql.functions import sum as sum_

    joined = orders_payments_join(spark, s)
    return joined.groupBy(window(col("order_time"), "5 minutes"), col("customer_id")).agg(
        count("*").alias("paid_orders"), sum_("payment_amount").alias("paid")
    )


def dedup_window_chain(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, window

    return (
        s["events"]
        .where(col("kind") != "test")
        .withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id"])
        .groupBy(window(col("event_time"), "5 minutes"), col("user_id"))
        .agg(count("*").alias("events"))
    )


def impressions_clicks(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import expr

    imps = s["impressions"].withWatermark("impression_time", "2 minutes")
    clicks = s["clicks"].withWatermark("click_time", "2 minutes")
    return (
        imps.alias("i")
        .join(
            clicks.alias("c"),
            expr(
                "i.ad_id = c.ad_id AND c.click_time >= i.impression_time AND "
                "c.click_time <= i.impression_time + INTERVAL 10 MINUTES"
            ),
            "left_outer",
        )
        .select("i.*", "c.click_id", "c.click_time")
    )


def unbounded_agg(_spark: Any, s: dict[str, Any]) -> Any:
    # no watermark, and every batch brings keys never seen before: state only grows
    return s["events"].groupBy("event_id").count()


def hot_key_join(_spark: Any, s: dict[str, Any]) -> Any:
    left = s["left"].alias("l")
    right = s["right"].alias("r")
    return left.join(right, "k").select("k", "l.v", "r.v")


# --------------------------------------------------------------------------- scenarios

SMALL = {"spark.sql.shuffle.partitions": "4"}
ROCKS = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
}


def scenarios() -> list[Scenario]:
    op = orders_payments_batches()
    join_schemas = {"orders": ORDERS, "payments": PAYMENTS}
    return [
        Scenario(
            "join_hdfs",
            "orders ⋈ payments inner join with a ±5 minute time range and 2 minute watermarks "
            "(the State Reader blog's example) on the HDFS-backed provider: matches, payments for "
            "missing orders, payments pointing to other orders, late payments, payments too far in "
            "time, a malformed key, a filtered order, a duplicated order; early rows evicted.",
            join_schemas,
            op,
            orders_payments_join,
            conf={**SMALL, "spark.sql.streaming.stateStore.providerClass": HDFS},
            event_log="zstd",
        ),
        Scenario(
            "join_rocksdb",
            "The same orders ⋈ payments join on the RocksDB provider with changelog checkpointing "
            "(.changelog files, .zip snapshots every 5 versions).",
            join_schemas,
            op,
            orders_payments_join,
            conf={**SMALL, **ROCKS},
            event_log="lz4",
        ),
        Scenario(
            "windowed_agg",
            "Event counts in 5-minute tumbling windows per user, 10 minute watermark, append mode: "
            "closed windows are emitted and evicted, recent ones wait for the watermark. Batches 4, 7 "
            "and 10 bring 1, 2 and 3 events 20 minutes old: late, dropped by the watermark.",
            {"events": EVENTS},
            with_late_events(event_batches(12, 10, 3), {4: 1, 7: 2, 10: 3}, 20),
            windowed_agg,
            conf=SMALL,
            event_log="rolling",
        ),
        Scenario(
            "dedup",
            "dropDuplicates(event_id, event_time) with a 10 minute watermark: repeated ids are "
            "dropped while in state, old ids are evicted as the watermark passes.",
            {"events": EVENTS},
            event_batches(12, 10, 3, id_fn=dedup_ids),
            dedup,
            conf=SMALL,
            event_log="plain",
        ),
        Scenario(
            "dedup_within_watermark",
            "dropDuplicatesWithinWatermark(event_id) with a 10 minute watermark: the state keeps each id with its expiry time.",
            {"events": EVENTS},
            event_batches(12, 10, 3, id_fn=dedup_ids),
            dedup_within_watermark,
            conf=SMALL,
        ),
        Scenario(
            "session_window",
            "session_window with a 15 minute gap per user and a 30 minute watermark (append): one "
            "user always active, others with idle gaps that close their sessions.",
            {"events": EVENTS},
            session_batches(),
            session_windows,
            conf=SMALL,
        ),
        Scenario(
            "apply_in_pandas_with_state",
            "applyInPandasWithState counting events per user with an event-time timeout 10 minutes after the "
            "user's last event; user-3 goes quiet after batch 3 and times out.",
            {"events": EVENTS},
            event_batches(12, 6, 4, users=4, idle_after={"user-3": 3}),
            apply_in_pandas_with_state,
            output_mode="update",
            conf=SMALL,
        ),
        Scenario(
            "transform_with_state",
            "transformWithStateInPandas per user with value state (count), list state (recent "
            "events), map state (count per kind) and an event-time timer 15 minutes after the last "
            "event; user-3 goes quiet after batch 3, its timer fires and clears its state. RocksDB provider.",
            {"events": EVENTS},
            event_batches(10, 6, 4, users=4, idle_after={"user-3": 3}),
            transform_with_state,
            output_mode="update",
            conf={**SMALL, **ROCKS},
        ),
        Scenario(
            "chained_join_agg",
            "Two stateful operators in one query: the orders ⋈ payments join (operator 1) followed "
            "by paid orders per customer in 5-minute windows (operator 0: Spark numbers stateful operators "
            "from the top of the plan, so the last one gets 0).",
            join_schemas,
            op,
            chained_join_agg,
            conf=SMALL,
            event_log="snappy",
        ),
        Scenario(
            "dedup_window_chain",
            "Two operators on RocksDB: dropDuplicates(event_id) (operator 1) then events per user in 5-minute "
            "windows (operator 0), 10 minute watermark, append, with kind 'test' filtered out first: a late "
            "record dropped by the dedup, a second record arriving after its window was emitted, duplicates "
            "across and within batches, keys differing by case and a trailing space, a filtered record.",
            {"events": EVENTS},
            chain_batches(),
            dedup_window_chain,
            conf={**SMALL, **ROCKS},
            event_log="plain",
        ),
        Scenario(
            "outer_join_clicks",
            "Impressions (JSON) LEFT OUTER JOIN clicks (Parquet) within 10 minutes after the impression, 2 "
            "minute watermarks: matches, impressions never clicked (emitted null-padded), a click that "
            "arrives after its impression was emitted (dropped as late), a click 16 minutes after (the "
            "condition rejects it), an impression still waiting.",
            {"impressions": IMPRESSIONS, "clicks": CLICKS},
            clicks_batches(),
            impressions_clicks,
            conf={**SMALL, "spark.sql.streaming.stateStore.providerClass": HDFS},
            event_log="zstd",
            formats={"clicks": "parquet"},
        ),
        Scenario(
            "file_sink_agg",
            "Events read from CSV files counted per user in 5-minute windows (10 minute watermark, append) "
            "and written to a Parquet file sink (sinks/file_sink_agg, with its _spark_metadata log); a late "
            "event in batch 7 is dropped.",
            {"events": EVENTS},
            sink_batches(),
            windowed_agg,
            conf=SMALL,
            event_log="plain",
            formats={"events": "csv"},
            sink="parquet",
        ),
        Scenario(
            "unbounded_agg",
            "Pathological: count per event_id with no watermark over ever-new keys for 12 batches: "
            "state grows every batch and nothing is ever removed.",
            {"events": EVENTS},
            event_batches(12, 25, 1),
            unbounded_agg,
            output_mode="update",
            conf=SMALL,
        ),
        Scenario(
            "hot_key_join",
            "Pathological: an inner join without watermark where one key ('hot') holds 1,500 of "
            "the left side's 1,548 rows: state skew.",
            {"left": "k STRING, v STRING, t TIMESTAMP", "right": "k STRING, v STRING, t TIMESTAMP"},
            hot_key_batches(),
            hot_key_join,
            conf={"spark.sql.shuffle.partitions": "8"},
        ),
        Scenario(
            "stuck_watermark_dedup",
            "Pathological: dropDuplicates with a watermark on an event time that never changes: "
            "the watermark is stuck and the state is never cleaned.",
            {"events": EVENTS},
            event_batches(12, 10, 1, time_fn=lambda b, i: ts(0)),
            dedup,
            conf=SMALL,
        ),
    ]


# --------------------------------------------------------------------------- runner


def write_inputs(root: Path, scenario: Scenario) -> None:
    base_mtime = 1_767_225_600  # 2026-01-01: file i gets mtime base + i, one file per batch
    for source, ddl in scenario.schemas.items():
        folder = root / source
        folder.mkdir(parents=True)
        fmt = scenario.formats.get(source, "json")
        for i, batch in enumerate(scenario.batches):
            path = folder / f"part-{i:05d}.{fmt}"
            rows = batch.get(source, [])
            if fmt == "json":
                path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            elif fmt == "csv":
                names = [c.split()[0] for c in ddl.split(",")]
                lines = [",".join(names)] + [",".join(str(r.get(n, "")) for n in names) for r in rows]
                path.write_text("\n".join(lines) + "\n")
            else:
                _write_parquet(path, ddl, rows)
            os.utime(path, (base_mtime + i, base_mtime + i))


def _write_parquet(path: Path, ddl: str, rows: Rows) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"STRING": pa.string(), "DOUBLE": pa.float64(), "BIGINT": pa.int64(), "TIMESTAMP": pa.timestamp("us", "UTC")}
    fields = [(c.split()[0], types[c.split()[1]]) for c in ddl.split(",")]
    columns = {}
    for name, t in fields:
        values = [r.get(name) for r in rows]
        if pa.types.is_timestamp(t):
            values = [dt.datetime.fromisoformat(v) if v else None for v in values]
        columns[name] = pa.array(values, t)
    pq.write_table(pa.table(columns, schema=pa.schema(fields)), path)


def _reader(spark: Any, scenario: Scenario, source: str, ddl: str, folder: Path) -> Any:
    r = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1)
    fmt = scenario.formats.get(source, "json")
    if fmt == "csv":
        return r.option("header", "true").csv(str(folder))
    return r.parquet(str(folder)) if fmt == "parquet" else r.json(str(folder))


def json_default(o: Any) -> Any:
    if isinstance(o, (dt.datetime, dt.date)):
        return o.isoformat()
    return str(o)


INPUTS = HERE / "inputs"  # a sample's input files, kept: inputs/<name>/<source>/part-*.<format>
SINKS = HERE / "sinks"  # a file sink's folder, kept: sinks/<name>/ (parquet files and _spark_metadata)


def _keep(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    for p in src.rglob("*"):  # the file source orders files by modification time: keep them
        q = dest / p.relative_to(src)
        st = p.stat()
        os.utime(q, (st.st_atime, st.st_mtime))


def _sink_rows(out: Path) -> list[dict[str, Any]]:
    """What a file sink wrote, per batch: the files each ``_spark_metadata/<batch>`` lists, read back
    (a ``<batch>.compact`` log lists every file so far: its own batch's are the ones no earlier log names)."""
    import pyarrow.parquet as pq

    rows = []
    seen: set[str] = set()
    logs = [p for p in (out / "_spark_metadata").iterdir() if p.name.split(".")[0].isdigit()]  # not .crc files
    for log in sorted(logs, key=lambda p: int(p.name.split(".")[0])):
        batch = int(log.name.split(".")[0])
        for line in log.read_text().splitlines()[1:]:
            name = json.loads(line)["path"].rsplit("/", 1)[-1]
            if name in seen:
                continue
            seen.add(name)
            for r in pq.read_table(out / name).to_pylist():
                rows.append({"batch_id": batch, "file": name, **r})
    return rows


def run(spark: Any, scenario: Scenario, dest: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=f"statelens-gen-{scenario.name}-") as tmp:
        inputs = Path(tmp) / "in"
        out = Path(tmp) / "out"
        write_inputs(inputs, scenario)
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
        for k in ROCKS | SMALL:
            spark.conf.unset(k)
        for k, v in scenario.conf.items():
            spark.conf.set(k, v)
        streams = {source: _reader(spark, scenario, source, ddl, inputs / source) for source, ddl in scenario.schemas.items()}
        df = scenario.build(spark, streams)
        emitted: list[dict[str, Any]] = []

        def collect(batch_df: Any, batch_id: int) -> None:
            for row in batch_df.collect():
                emitted.append({"batch_id": batch_id, **row.asDict(recursive=True)})

        if dest.exists():
            shutil.rmtree(dest)
        writer = df.writeStream.outputMode(scenario.output_mode).option("checkpointLocation", str(dest))
        if scenario.sink == "parquet":
            writer = writer.format("parquet").option("path", str(out))
        else:
            writer = writer.foreachBatch(collect)
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        if query.exception():
            raise RuntimeError(str(query.exception()))
        progress = [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]
        if scenario.sink == "parquet":
            emitted = _sink_rows(out)
            _keep(out, SINKS / scenario.name)
        if scenario.event_log:
            _keep(inputs, INPUTS / scenario.name)
    OUTPUTS.mkdir(exist_ok=True)
    if scenario.event_log:  # what Spark reported in-process: the truth the event log readers are tested against
        (OUTPUTS / f"{scenario.name}.progress.json").write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")
    emitted.sort(key=lambda r: json.dumps(r, sort_keys=True, default=json_default))
    (OUTPUTS / f"{scenario.name}.json").write_text(json.dumps(emitted, indent=1, default=json_default, sort_keys=True) + "\n")
    print(f"{scenario.name}: {len(scenario.batches)} input batches, {len(emitted)} output rows", flush=True)


def write_readme(all_scenarios: list[Scenario]) -> None:
    lines = [
        "# Sample checkpoints",
        "",
        "Real checkpoints written by real Structured Streaming queries on local Spark "
        "(PySpark 4.3) by `generate.py` over deterministic input files, one file per micro-batch. "
        "Event times start at 2026-01-01 00:00 UTC. `outputs/<name>.json` holds the rows each query "
        "emitted (the ground truth tests compare diagnoses with). Regenerate with "
        "`python sample_checkpoints/generate.py [name ...]`; State Lens only ever reads these folders.",
        "",
        "| checkpoint | what it shows | event log |",
        "|---|---|---|",
    ]
    lines += [f"| `{s.name}` | {s.description} | {s.event_log or ''} |" for s in all_scenarios]
    lines += [
        "",
        "## Event logs and progress",
        "",
        "Samples with an event log ran in their own Spark application with `spark.eventLog.enabled`; "
        "`event_logs/<name>/` holds that application's log as Spark wrote it (compressed with the codec named "
        "above, or a rolling `eventlog_v2_*` folder), and `outputs/<name>.progress.json` what the query reported "
        "in-process (`query.recentProgress`) in the same run. "
        f"`sources/{RATE_SAMPLE}/checkpoint` unions the `rate` (20 rows/s) and `rate-micro-batch` (10 rows per "
        "batch) sources into a windowed count, one batch per Trigger.Once run; `progress.jsonl` holds each "
        "run's StreamingQueryProgress as one JSON line.",
        "",
        "## Input files, file sinks and Spark's reads",
        "",
        "A sample with an event log keeps the input files its query read in `inputs/<name>/<source>/` (the "
        "checkpoint's source log names them where they were written, a temporary folder: give "
        "`--input-root sample_checkpoints/inputs/<name>`; the app fills it in for a bundled sample). "
        "`sinks/file_sink_agg/` is that query's Parquet file sink with its `_spark_metadata` log; "
        "`outputs/file_sink_agg.json` lists its rows with the batch that wrote each file. "
        "`golden/<name>.jsonl.gz` holds what the pinned PySpark's State Data Source reads from every sample "
        "(every store at every batch, every change feed, `state-metadata`), written by `generate.py --golden` "
        "after the samples: the native reader's equality test compares with it.",
    ]
    import compat

    lines += [
        "",
        "## Compatibility samples",
        "",
        "`compat/<version>/<scenario>/` were written by that PySpark version (`generate.py --spark VERSION|all`, "
        "each version in its own virtual environment under ~/.cache/statelens-compat). "
        "`compat/<version>/truth/<scenario>.json` records what really happened: the rows the query emitted with "
        "their batch ids, and every committed batch's keys per store as Spark's State Data Source read them "
        "(`state_read_by`: Spark 3.x has no such reader, so the project's PySpark read those).",
        "",
        *compat.readme_rows(),
    ]
    (HERE / "README.md").write_text("\n".join(lines) + "\n")


def _golden(names: list[str]) -> None:
    """Spark's reads of these samples as golden files (``golden.py``), in a process of its own: the
    project's Spark session, not the generator's."""
    import subprocess

    subprocess.run([sys.executable, str(HERE / "generate.py"), "--golden", *names], check=True)


def main(argv: list[str]) -> int:
    if argv == ["--readme"]:
        write_readme(scenarios())
        return 0
    if argv and argv[0] == "--golden":  # Spark's reads of the samples, for the equality test
        import golden

        return golden.main(argv[1:])
    if argv == ["--restart-errors"]:  # real failed restarts, for the doctor's explanations
        import restart_errors

        return restart_errors.main([])
    if argv and argv[0] == "--spark":  # compatibility samples: another PySpark version, in its own venv
        import compat

        versions = compat.VERSIONS if argv[1] == "all" else [argv[1]]
        for v in versions:
            compat.generate(v, argv[2:])
        write_readme(scenarios())
        _golden([n for n in golden_names() if n.startswith("compat/") and n.split("/")[1] in versions])
        return 0
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers need this venv's pandas/pyarrow

    all_scenarios = scenarios()
    chosen = [s for s in all_scenarios if not argv or s.name in argv]
    if not argv or RATE_SAMPLE in argv:
        spark = start_spark({})
        rate_sample(spark, SOURCES / RATE_SAMPLE)
        spark.stop()
    plain = [s for s in chosen if not s.event_log]
    if plain:
        spark = start_spark({})
        for s in plain:
            run(spark, s, HERE / s.name)
        spark.stop()
    for s in chosen:  # an event log belongs to one application: one Spark application per such sample
        if s.event_log:
            with tempfile.TemporaryDirectory(prefix="statelens-eventlog-") as tmp:
                spark = start_spark(event_log_conf(s.event_log, tmp))
                run(spark, s, HERE / s.name)
                spark.stop()
                dest = EVENT_LOGS / s.name
                if dest.exists():
                    shutil.rmtree(dest)
                shutil.copytree(tmp, dest)
                print(f"{s.name}: event log ({s.event_log}) {sorted(p.name for p in dest.rglob('*') if p.is_file())}")
    write_readme(all_scenarios)
    _golden([s.name for s in chosen])
    return 0


def golden_names() -> list[str]:
    import golden

    return golden.sample_names()


EVENT_LOGS = HERE / "event_logs"
SOURCES = HERE / "sources"  # samples of other sources (not file): sources/<name>/checkpoint, progress.jsonl
RATE_SAMPLE = "rate_union"


def rate_sample(spark: Any, dest: Path, runs: int = 6) -> None:
    """The rate and rate-micro-batch sources unioned into a windowed count, one batch per run
    (Trigger.Once, six runs on one checkpoint). A listener-style file ``progress.jsonl`` holds each
    run's StreamingQueryProgress JSON: the JSON-lines progress format, and the truth for the
    source offsets read from the checkpoint."""
    from pyspark.sql.functions import col, count, lit, window

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    rate = spark.readStream.format("rate").option("rowsPerSecond", 20).load().select("timestamp", lit("rate").alias("src"))
    per_batch = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 10)
        .option("startTimestamp", int(T0.timestamp() * 1000))
        .option("advanceMillisPerBatch", 60_000)
        .load()
        .select("timestamp", lit("rate-micro-batch").alias("src"))
    )
    counts = (
        rate.union(per_batch)
        .withWatermark("timestamp", "10 minutes")
        .groupBy(window(col("timestamp"), "5 minutes"), col("src"))
        .agg(count("*").alias("rows"))
    )
    lines = []
    for _ in range(runs):
        q = (
            counts.writeStream.outputMode("update")
            .format("noop")
            .option("checkpointLocation", str(dest / "checkpoint"))
            .trigger(once=True)
            .start()
        )
        q.awaitTermination()
        if q.exception():
            raise RuntimeError(str(q.exception()))
        lines += [p.json if hasattr(p, "json") else json.dumps(p) for p in q.recentProgress]
        time.sleep(1.5)  # the rate source's offset counts seconds: let a few pass between runs
    (dest / "progress.jsonl").write_text("".join(json.dumps(json.loads(x)) + "\n" for x in lines))
    print(f"{dest.name}: {runs} batches, progress.jsonl with {len(lines)} records", flush=True)


def event_log_conf(kind: str, folder: str) -> dict[str, str]:
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": Path(folder).as_uri(),
        "spark.eventLog.rolling.enabled": "true" if kind == "rolling" else "false",
        "spark.eventLog.compress": "false" if kind in ("plain", "rolling") else "true",
    }
    if kind not in ("plain", "rolling"):
        conf["spark.eventLog.compression.codec"] = kind
    return conf


def start_spark(conf: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("statelens-sample-generator")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # RocksDB uploads changelog-mode snapshots from the maintenance thread: run it often
        # so that the short sample queries leave .zip snapshots beside their .changelog files
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms")
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
