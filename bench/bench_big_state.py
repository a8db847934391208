"""Big state: the 5,000,000-key aggregations (``big_checkpoints.agg_5m``, written by a PySpark 4.3
query, RocksDB with changelog checkpointing and HDFS), whole CLI processes, medians, peak memory
of each process (``os.wait4``):

* why-missing of a key never seen: the verdict alone (``--no-near-misses``), cold;
* its search for near misses: cold (no key index yet: built by this question), warm (kept);
* a look-alike of a real key (``User_4999999`` for ``user-4999999``): warm;
* growth over the 20 batches against the plain approach, a ``statestore`` count per batch in a
  warm Spark session (the session's start is not counted);
* the app's path (its cached functions in a running app, cold): until the verdict shows, until
  the near misses follow;
* the decoded table (the newest state, every column) for scale.

    .venv/bin/python bench/bench_big_state.py [--runs 3] [--skip-spark]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from big_checkpoints import agg_5m, spark_session  # noqa: E402


def run(args: list[str], cache: str) -> tuple[float, int]:
    """(seconds, peak resident MB) of one CLI process."""
    env = {**os.environ, "STATELENS_CACHE_DIR": cache}
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{args} failed: {p.stderr.read().decode() if p.stderr else ''}")
    return took, usage.ru_maxrss // 1024


def medians(samples: list[tuple[float, int]]) -> tuple[float, int]:
    return statistics.median(s for s, _ in samples), max(m for _, m in samples)


def decoded_mb(cp: str) -> float:
    """The newest state of the store, every column decoded, in MB (in a process of its own, so this
    process stays small: a child's peak memory counts its parent's at the fork)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]);"
        "from statelens.analysis.core.model import sources_of; from statelens.spark_io.logs.checkpoint import read_checkpoint;"
        "from statelens.spark_io.readers.native.reader import NativeReader;"
        "i = read_checkpoint(sys.argv[1]);"
        "print(NativeReader(i).state(sources_of(i.operators[0])[0], i.committed_batches[-1].batch_id).nbytes)"
    )
    return int(subprocess.check_output([sys.executable, "-c", code, cp, str(ROOT)], text=True)) / 2**20


APP = """
import logging, sys, time
sys.path.insert(0, sys.argv[2])
logging.disable(logging.WARNING)
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import engine
from statelens.views import common
engine.configure("native")
engine.warm_native_in_background().join()  # as the app does at launch
cp, key = sys.argv[1], ("never-seen-key",)
batch = read_checkpoint(cp).last_committed
t0 = time.perf_counter()
common.why_missing_cached(cp, KeyQuestion(tuple(key), operator=0, batch=batch, near_misses=False))
t1 = time.perf_counter()
assert common.why_missing_cached(cp, KeyQuestion(tuple(key), operator=0, batch=batch)).report.results[0].verdict == "never_in_state"
print(t1 - t0, time.perf_counter() - t0)
"""


def app_path(cp: str) -> tuple[float, float]:
    """The why-missing page's cached functions (the app running, cold cache): seconds until the
    verdict shows, and until the near misses follow it."""
    env = {**os.environ, "STATELENS_CACHE_DIR": tempfile.mkdtemp()}
    out = subprocess.check_output([sys.executable, "-c", APP, cp, str(ROOT)], env=env, text=True, stderr=subprocess.DEVNULL)
    verdict, near = out.split()
    return float(verdict), float(near)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-spark", action="store_true", help="not the Spark baseline (minutes)")
    args = ap.parse_args()
    growth_s = {}
    checkpoints = {provider: str(agg_5m(provider)) for provider in ("rocksdb", "hdfs")}  # built first (Spark, once)
    for provider, cp in checkpoints.items():
        never = ["why-missing", cp, "never-seen-key", "--operator", "0"]
        verdict = medians([run([*never, "--no-near-misses"], tempfile.mkdtemp()) for _ in range(args.runs)])
        cold, warm = [], []
        for _ in range(args.runs):
            cache = tempfile.mkdtemp(prefix="statelens-bench-")
            cold.append(run(never, cache))
            warm.append(run(never, cache))
        alike = run(["why-missing", cp, "User_4999999", "--operator", "0"], cache)
        growth = medians([run(["growth", cp], tempfile.mkdtemp()) for _ in range(args.runs)])
        shown = [app_path(cp) for _ in range(args.runs)]
        growth_s[provider] = growth[0]
        print(f"\n{provider}: {cp} (5,000,000 keys; the decoded table: {decoded_mb(cp):,.0f} MB)")
        for label, (s, mb), target in (
            ("never-seen key, verdict alone (cold)", verdict, "< 2 s"),
            ("never-seen key with near misses, cold", medians(cold), "< 5 s"),
            ("never-seen key with near misses, warm", medians(warm), "< 1 s"),
            ("a look-alike key, warm", alike, ""),
            ("growth, 20 batches", growth, ""),
        ):
            print(f"  {label:40s} {s:6.2f} s  peak {mb:,} MB  {target}", flush=True)
        for label, i in (("app: the verdict shows (cold)", 0), ("app: the near misses follow (cold)", 1)):
            print(f"  {label:40s} {statistics.median(x[i] for x in shown):6.2f} s  (in the running app)")
    if args.skip_spark:
        return
    from statelens.analysis.core.model import sources_of
    from statelens.spark_io.logs.checkpoint import read_checkpoint

    spark = spark_session()
    for provider, cp in checkpoints.items():
        info = read_checkpoint(cp)
        src = sources_of(info.operators[0])[0]
        spark.read.format("statestore").option("batchId", info.committed_batches[-1].batch_id).load(cp).count()  # warm
        t0 = time.perf_counter()
        for b in (x.batch_id for x in info.committed_batches):
            spark.read.format("statestore").option("storeName", src.store_name or "default").option("batchId", b).load(cp).count()
        spark_s = time.perf_counter() - t0
        print(
            f"{provider}: growth, Spark count per batch (warm session): {spark_s:6.2f} s ({spark_s / growth_s[provider]:.1f}x State Lens)"
        )


if __name__ == "__main__":
    main()
