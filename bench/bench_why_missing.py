"""'Why is key X missing' against a 1,000,000-key join state, warm SparkSession.

Compares, in the same run and as medians:
* Spark's bare scan of that join state: count() of both sides' keyWithIndexToValue stores
  at the last batch (the rows a diagnosis has to consult);
* the notebook way: both sides toPandas(), then a pandas outer merge on the key (the State
  Reader blog's diagnosis);
* State Lens's verdict for one key that joined in the last batches (the usual question: a
  recent order is missing), for one key from the first batches, and for a key never seen.
Target: the recent-key verdict costs at most 1.5x the bare scan.

    .venv/bin/python bench/bench_why_missing.py [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from statelens.analysis.core.question import KeyQuestion

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from big_checkpoints import join_1m, spark_session  # noqa: E402
from timing import median_seconds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    cp = str(join_1m())
    spark = spark_session()
    from statelens.analysis.verdicts import diagnose
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers.spark_state import SparkState

    info = read_checkpoint(cp)
    batch = info.last_committed
    assert batch is not None

    def side(store: str):  # type: ignore[no-untyped-def]
        return spark.read.format("statestore").option("storeName", store).option("batchId", batch).load(cp)

    left_rows = side("left-keyWithIndexToValue").count()
    recent, old, never = f"ord-{left_rows - 10}", "ord-10", "ord-does-not-exist"

    def bare_scan() -> None:
        side("left-keyWithIndexToValue").count()
        side("right-keyWithIndexToValue").count()

    def notebook() -> None:
        left = side("left-keyWithIndexToValue").selectExpr("key.field0 AS k", "value.matched AS m").toPandas()
        right = side("right-keyWithIndexToValue").selectExpr("key.field0 AS k", "value.matched AS m").toPandas()
        merged = left.merge(right, on="k", how="outer")
        assert len(merged[merged["k"] == recent]) == 1

    def verdict(key: str, expected: str, prune: bool = True):  # type: ignore[no-untyped-def]
        def run() -> None:
            (r,) = diagnose.why_missing(SparkState(info, prune=prune), info, KeyQuestion((key,))).results
            assert r.verdict == expected, (key, r.verdict, r.explanation)

        return run

    for fn in (bare_scan, verdict(recent, "matched")):  # warm-up: JIT, RocksDB local copies
        fn()
    results = {
        "bare scan of both sides (count)": median_seconds(bare_scan, args.runs),
        f"verdict, key from the last batches ({recent})": median_seconds(verdict(recent, "matched"), args.runs),
        "same, reading every partition (no pruning)": median_seconds(verdict(recent, "matched", prune=False), args.runs),
        f"verdict, key from the first batch ({old})": median_seconds(verdict(old, "matched"), max(1, args.runs // 2)),
        f"verdict, key never seen ({never})": median_seconds(verdict(never, "never_in_state"), max(1, args.runs // 2)),
        "notebook: toPandas both sides + outer merge": median_seconds(notebook, max(1, args.runs // 2)),
    }
    base = results["bare scan of both sides (count)"]
    print(f"join state: {left_rows:,} left rows, {len(info.batches)} batches; median seconds, ratio to the bare scan")
    for name, t in results.items():
        print(f"  {name:58s} {t:7.2f} s  {t / base:5.2f}x")
    target = results[f"verdict, key from the last batches ({recent})"] / base
    print(f"target: recent-key verdict <= 1.5x the bare scan: {'met' if target <= 1.5 else 'NOT met'} ({target:.2f}x)")
    gain = results["same, reading every partition (no pruning)"] / results[f"verdict, key from the last batches ({recent})"]
    print(f"goal: the key's partition only, >= 5x faster than every partition: {'met' if gain >= 5 else 'NOT met'} ({gain:.1f}x)")


if __name__ == "__main__":
    main()
