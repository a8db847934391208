"""Before the change: ``statelens preflight`` and ``statelens repartition``, whole CLI processes, medians.

* preflight, cold, on a checkpoint of ``tests/jobs/changed_job.py`` (windowed aggregation): the
  job unchanged (restarts) and with a key added (fails), against the plain approach in the same
  run: copy the checkpoint and restart the changed job on the copy (one process each);
* repartition preview of the 5,000,000-key RocksDB aggregation (``big_checkpoints.agg_5m``) to 16
  partitions, against the plain approach: Spark's real offline repartition of a copy, then a
  ``statestore`` count per partition (in a warm session: its start is not counted).

    .venv/bin/python bench/bench_preflight.py [--runs 3] [--skip-big]
"""

from __future__ import annotations

import argparse
import os
import shutil
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
sys.path.insert(0, str(ROOT / "tests" / "jobs"))

import changed_job as cj  # noqa: E402

JOB = ROOT / "tests" / "jobs" / "changed_job.py"


def timed(args: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{args[:4]} failed: {p.stderr[-800:]}")
    return took


def job(change: str, inputs: Path, checkpoint: Path, output: Path) -> list[str]:
    return [sys.executable, str(JOB), "--query", "windowed_agg", "--change", change, "--input", str(inputs),
            "--checkpoint", str(checkpoint), "--output", str(output), "--sink", "foreach_batch"]  # fmt: skip


def bench_preflight(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for b in range(3):
            cj.write_input(root / "in", b)
        timed(job("none", root / "in", root / "cp", root / "out"))
        cj.write_input(root / "in", 10)  # new data for the next batch, as a real restart finds it
        for change in ("none", "key_added"):
            pre, plain = [], []
            for i in range(runs):
                pre.append(timed([sys.executable, str(ROOT / "cli.py"), "preflight", str(root / "cp"), "--json", "--",
                                  *job(change, root / "in", root / "cp", root / f"o{i}")]))  # fmt: skip
                copy = root / f"copy{change}{i}"
                t0 = time.perf_counter()
                shutil.copytree(root / "cp", copy)
                subprocess.run(job(change, root / "in", copy, root / f"p{i}"), capture_output=True)  # fails for key_added
                plain.append(time.perf_counter() - t0)
            a, b = statistics.median(pre), statistics.median(plain)
            print(f"preflight, job {change!r}: {a:.1f} s (target <= 30 s); copy + real restart: {b:.1f} s; ratio {a / b:.2f}")


def bench_repartition(runs: int) -> None:
    from big_checkpoints import agg_5m, spark_session

    cp = agg_5m("rocksdb")
    cache = tempfile.mkdtemp(prefix="statelens-bench-cache-")
    env = {**os.environ, "STATELENS_CACHE_DIR": cache}
    ours = [
        timed([sys.executable, str(ROOT / "cli.py"), "repartition", str(cp), "--partitions", "16", "--json"], env)
        for _ in range(runs)
    ]
    spark = spark_session()
    plain = []
    for _ in range(max(1, runs // 2)):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "cp"
            t0 = time.perf_counter()
            shutil.copytree(cp, copy)
            spark._streamingCheckpointManager.repartition(str(copy), 16)
            spark.read.format("statestore").load(str(copy)).groupBy("partition_id").count().collect()
            plain.append(time.perf_counter() - t0)
    a, b = statistics.median(ours), statistics.median(plain)
    print(
        f"repartition preview, 5M keys -> 16 partitions: {a:.2f} s (target <= 5 s); Spark's repartition of a copy + count: {b:.1f} s; {b / a:.1f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-big", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    bench_preflight(args.runs)
    if not args.skip_big:
        bench_repartition(args.runs)


if __name__ == "__main__":
    main()
