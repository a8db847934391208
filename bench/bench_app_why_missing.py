"""Why-missing as the app runs it: the page's cached functions, on the 1,000,000-key join state.

Compares, in the same run (medians), the app's path (``views.common.why_missing_cached``) on both
engines:
* native: the first key reads only its partition's state and history from the state files (the
  reader's modules and compiled loops loaded first, as the app does at launch); the near-miss
  search reads the other side's keys; snapshots read are kept for the keys after it;
* Spark: the first key loads the operator's state and change feeds through the State Data Source
  once (``load_state``); later keys are answered from memory.
Keys: orders without payments (waiting for the other side: the costly verdict, with the side's
eviction delay) and paid orders (matched). Verdicts of both engines are asserted equal.
Later keys are timed back to back, and after a pause of a few seconds (a user reading the answer;
the native reader reads the rest of the stores asked about meanwhile). Goals: the first answer
natively in under 2 s; later keys as fast as from Spark's loaded state.

    .venv/bin/python bench/bench_app_why_missing.py [--runs 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from big_checkpoints import join_1m, spark_session  # noqa: E402
from timing import median_seconds  # noqa: E402

PAUSE = 3.0  # seconds a user takes to read an answer and type the next key


def paused(fn: Any, runs: int) -> float:
    """The median time of ``fn``, each run after a pause (as between a user's questions)."""
    times = []
    for _ in range(runs):
        time.sleep(PAUSE)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    cp = str(join_1m())
    spark_session()
    from statelens.analysis.core.question import KeyQuestion
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers import engine
    from statelens.views import common

    info = read_checkpoint(cp)
    batch = info.last_committed
    assert batch is not None
    n = 1_000_000
    keys = iter(f"ord-{n - 1 - 2 * i}" for i in range(1000))  # odd: never paid, waiting
    paid = iter(f"ord-{n - 2 - 2 * i}" for i in range(1000))

    def app(key: str) -> str:
        (r,) = common.why_missing_cached(cp, KeyQuestion((key,), operator=0, batch=batch)).report.results
        return r.verdict

    results = {}
    verdicts: dict[str, dict[str, str]] = {}
    for which in ("native", "spark"):
        engine.configure(which)
        if which == "native":
            engine.warm_native_in_background().join()  # as the app does at launch (views.common.warm_up_in_background)
        common._asked.clear()  # the answers, and the checkpoint's kept object with what it read
        common._opened.clear()
        t0 = time.perf_counter()
        common.asked(cp, "key_fields", 0)  # the page opens: its key-field select (a join's field0 = order_id)
        results[f"{which}: page opens (key fields)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        first = app(next(keys))
        results[f"{which}: first key (cold)"] = time.perf_counter() - t0
        assert first == "waiting_for_other_side", first
        results[f"{which}: each later key, waiting"] = median_seconds(lambda: app(next(keys)), args.runs)
        results[f"{which}: each later key, matched"] = median_seconds(lambda: app(next(paid)), args.runs)
        time.sleep(PAUSE)  # the user reads the answers before the next question
        results[f"{which}: later key after a pause, waiting"] = paused(lambda: app(next(keys)), args.runs)
        verdicts[which] = {k: app(k) for k in ("ord-999989", "ord-999990", "ord-1", "ord-2")}
    assert verdicts["native"] == verdicts["spark"], verdicts
    base = results["spark: first key (cold)"]
    print(f"join state: {n:,} orders, {len(info.batches)} batches; median seconds, ratio to Spark's first key")
    for name, t in results.items():
        print(f"  {name:40s} {t:7.2f} s  {base / t:7.1f}x faster")
    first_native = results["native: first key (cold)"]
    print(f"goal: the first answer natively under 2 s: {'met' if first_native < 2 else 'NOT met'} ({first_native:.2f} s)")


if __name__ == "__main__":
    main()
