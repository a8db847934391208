"""Growth over 41 batches of a 1,000,000-key join state: one change-feed pass vs a count() per batch.

Both approaches measure the same store (left-keyWithIndexToValue) at every retained batch, in
the same run with a warm session. The change-feed pass is what State Lens does
(``spark_io.gather.checkup.store_growth``); the plain approach re-reads the state at each batch.

    .venv/bin/python bench/bench_growth.py [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from big_checkpoints import join_1m, spark_session  # noqa: E402
from timing import median_seconds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    cp = str(join_1m())
    spark = spark_session()
    from statelens.analysis.core.model import StateSource
    from statelens.spark_io.gather.checkup import store_growth
    from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint

    info = read_checkpoint(cp)
    op = info.operators[0]
    src = StateSource(op.operator_id, store_name="left-keyWithIndexToValue")
    files = list_state_files(cp)
    batches = [b.batch_id for b in info.committed_batches]
    result = {}

    def change_feed() -> None:
        result["feed"] = store_growth(info, op, src, files).rows

    def count_per_batch() -> None:
        result["counts"] = {
            b: spark.read.format("statestore").option("storeName", src.store_name).option("batchId", b).load(cp).count()
            for b in batches
        }

    change_feed()  # warm-up
    t_feed = median_seconds(change_feed, args.runs)
    t0 = time.perf_counter()
    count_per_batch()
    t_counts = time.perf_counter() - t0
    assert result["feed"] == result["counts"], "the change-feed pass must give the same rows per batch"
    print(f"growth of {src.store_name} over {len(batches)} batches ({result['feed'][batches[-1]]:,} rows at the end)")
    print(f"  State Lens, one change-feed pass (median of {args.runs}): {t_feed:7.2f} s")
    print(f"  plain, statestore count() per batch ({len(batches)} scans):    {t_counts:7.2f} s")
    print(f"  ratio: {t_counts / t_feed:.1f}x faster (target >= 10x: {'met' if t_counts / t_feed >= 10 else 'NOT met'})")


if __name__ == "__main__":
    main()
