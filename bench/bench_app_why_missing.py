"""Why-missing as the app runs it: the page's cached functions, on the 1,000,000-key join state.

Compares, in the same run (medians):
* the app's path (``views.common.diagnose_cached``): the first key loads the operator's state and
  change feeds once (``load_state``); every later key is answered from memory;
* the direct path: every key read through Spark (``spark_io.diagnosis.why_missing``), which is
  what each new key cost in the app before.
Keys: orders without payments (waiting for the other side: the costly verdict, with the side's
eviction delay) and paid orders (matched). Verdicts of both paths are asserted equal.
Goal: a second key answers in under 1 s.

    .venv/bin/python bench/bench_app_why_missing.py [--runs 5]
"""

from __future__ import annotations

import argparse
import logging
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
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    cp = str(join_1m())
    spark_session()
    from spark_io.checkpoint import read_checkpoint
    from spark_io.diagnosis import why_missing
    from views import common

    info = read_checkpoint(cp)
    batch = info.last_committed
    assert batch is not None
    n = 1_000_000
    keys = iter(f"ord-{n - 1 - 2 * i}" for i in range(1000))  # odd: never paid, waiting
    paid = iter(f"ord-{n - 2 - 2 * i}" for i in range(1000))

    def app(key: str) -> str:
        (r,) = common.diagnose_cached(cp, 0, batch, None, (key,)).results
        return r.verdict

    def direct(key: str) -> str:
        (r,) = why_missing(cp, [key], 0, batch, info=info).results
        return r.verdict

    why_missing(cp, ["ord-1"], 0, batch, info=info)  # warm-up: JIT, RocksDB local copies
    t0 = time.perf_counter()
    first = app(next(keys))
    first_s = time.perf_counter() - t0
    assert first == "waiting_for_other_side", first
    for k in ("ord-999989", "ord-999990"):
        assert app(k) == direct(k), k
    results = {
        "app: first key (loads state + change feeds once)": first_s,
        "app: each later key, waiting (from memory)": median_seconds(lambda: app(next(keys)), args.runs),
        "app: each later key, matched (from memory)": median_seconds(lambda: app(next(paid)), args.runs),
        "direct: each key through Spark, waiting": median_seconds(lambda: direct(next(keys)), max(1, args.runs // 2)),
        "direct: each key through Spark, matched": median_seconds(lambda: direct(next(paid)), max(1, args.runs // 2)),
    }
    base = results["direct: each key through Spark, waiting"]
    print(f"join state: {n:,} orders, {len(info.batches)} batches; median seconds, ratio to a direct Spark read")
    for name, t in results.items():
        print(f"  {name:52s} {t:7.2f} s  {t / base:5.2f}x")
    later = results["app: each later key, waiting (from memory)"]
    print(f"goal: a later key in under 1 s: {'met' if later < 1 else 'NOT met'} ({later:.2f} s, {base / later:.0f}x faster)")


if __name__ == "__main__":
    main()
