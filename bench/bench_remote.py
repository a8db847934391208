"""Checkpoints on S3, read natively, with 30 ms added to every request (a loopback proxy in front
of moto's S3 server, as a real region adds); whole CLI processes, medians, against the same
command on the local folders in the same run; the requests made are printed.

* why-missing of one key, cold (empty cache) and warm (the cache of immutable state files
  filled by the first question); and as the app runs it (its cached functions in a running
  process): the first question, then the same question again with the answers' cache cleared;
* ``statelens ls`` of a prefix holding 50 checkpoints (the bundled samples, copied under 50
  names), which reads listings and small log files only: cold, and the next look (the log files
  of committed batches kept in the cache; the folders listed again).

The 1,000,000-key RocksDB join (8 partitions, ``big_checkpoints.join_1m``). Spark cannot be the
plain approach here: it has no S3 connector without Maven (hadoop-aws), which this machine cannot
reach; the ratio is against the local read.

    .venv/bin/python bench/bench_remote.py [--runs 3] [--latency-ms 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

import object_stores as stores  # noqa: E402
from big_checkpoints import join_1m  # noqa: E402


def server_cpu(server: stores.Server) -> float:
    """CPU seconds the S3 server process has used so far."""
    fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {r.stderr.strip()}")
    return took


SAMPLES = ROOT / "sample_checkpoints"
FLEET = 50


def fleet(server: stores.Server, tmp: Path) -> tuple[str, Path]:
    """50 checkpoints under one prefix on S3 and under one local folder: the samples, round robin."""
    names = sorted(p.name for p in SAMPLES.iterdir() if (p / "offsets").is_dir() and (p / "commits").is_dir())
    local = tmp / "fleet"
    for i in range(FLEET):
        name = names[i % len(names)]
        copy = stores.without_local_checksums(SAMPLES / name, local / f"{i:02d}_{name}")
        stores.upload(server, copy, f"fleet/{i:02d}_{name}")
    return stores.uri_of("s3", "fleet"), local


APP = """
import logging, statistics, sys, time
sys.path.insert(0, sys.argv[3])
logging.disable(logging.WARNING)
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io import storage
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import engine
from statelens.views import common
engine.configure("native")
engine.warm_native_in_background().join()  # as the app does at launch
cp, key = sys.argv[1], sys.argv[2]

def ask():  # one run of the page: its own question (folders listed anew), the answers' cache cleared
    common._asked.clear()  # the answer; the checkpoint's kept object keeps what it read
    t0 = time.perf_counter()
    with storage.question():
        common.why_missing_cached(cp, KeyQuestion((key,), operator=0, batch=read_checkpoint(cp).last_committed))
    return time.perf_counter() - t0

first = ask()
print(first, statistics.median(ask() for _ in range(5)))
"""


def app_path(uri: str, key: str, env: dict[str, str]) -> tuple[float, float]:
    """The why-missing page's path in a running app (its cached functions): the first question on
    an empty cache, then the same question asked again (the checkpoint's files cached, the answer not)."""
    out = subprocess.check_output([sys.executable, "-c", APP, uri, key, str(ROOT)], env=env, text=True, stderr=subprocess.DEVNULL)
    first, again = out.split()
    return float(first), float(again)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=30)
    args = ap.parse_args()
    local = join_1m()
    key = "ord-999998"  # joined in the last batch's window: in the left side's state
    server = stores.start_s3(Path(tempfile.mkdtemp()), delay=args.latency_ms / 1000)
    try:
        files = sum(1 for p in local.rglob("*") if p.is_file() and not p.name.endswith(".crc"))
        t0 = time.perf_counter()
        copy = stores.without_local_checksums(local, Path(tempfile.mkdtemp()) / "join_1m")
        uri = stores.upload(server, copy, "checkpoints/join_1m")
        print(f"uploaded {files:,} files in {time.perf_counter() - t0:.1f} s; {args.latency_ms:.0f} ms added per request")
        base = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"} | server.env
        question = ["why-missing", "KEY_CP", key, "--operator", "0", "--json"]

        def q(cp: str) -> list[str]:
            return [cp if a == "KEY_CP" else a for a in question]

        local_s = statistics.median(run(q(str(copy)), base) for _ in range(args.runs))
        cold, warm, cold_requests, warm_requests = [], [], Counter(), Counter()
        for _ in range(args.runs):
            env = base | {"STATELENS_CACHE_DIR": tempfile.mkdtemp(prefix="statelens-bench-cache-")}
            with server.proxy.counting() as got:
                cold.append(run(q(uri), env))
            cold_requests = Counter(m for m, _ in got)
            with server.proxy.counting() as got:
                warm.append(run(q(uri), env))
            warm_requests = Counter(m for m, _ in got)
        c, w = statistics.median(cold), statistics.median(warm)
        shown = [app_path(uri, key, base | {"STATELENS_CACHE_DIR": tempfile.mkdtemp()}) for _ in range(args.runs)]
        print(f"why-missing of one key, local folder:  {local_s:6.2f} s")
        print(
            f"why-missing of one key, S3 cold:       {c:6.2f} s  ({c / local_s:.1f}x local; target < 3 s)  requests {dict(cold_requests)}"
        )
        print(
            f"why-missing of one key, S3 warm:       {w:6.2f} s  ({w / local_s:.1f}x local; target < 0.5 s) requests {dict(warm_requests)}"
        )
        a, b = statistics.median(x[0] for x in shown), statistics.median(x[1] for x in shown)
        print(f"the app (running), S3 first question:  {a:6.2f} s")
        print(f"the app (running), S3 asked again:     {b:6.2f} s  (target < 0.5 s)")

        prefix, folder = fleet(server, Path(tempfile.mkdtemp()))
        ls_local = statistics.median(run(["ls", str(folder), "--json"], base) for _ in range(args.runs))
        remote, again, cold_requests, warm_requests, cpu = [], [], Counter(), Counter(), [0.0, 0.0]
        for _ in range(args.runs):
            env = base | {"STATELENS_CACHE_DIR": tempfile.mkdtemp()}
            before = server_cpu(server)
            with server.proxy.counting() as got:
                remote.append(run(["ls", prefix, "--json"], env))
            cold_requests, cpu[0] = Counter(m for m, _ in got), server_cpu(server) - before
            before = server_cpu(server)
            with server.proxy.counting() as got:  # the next look (log files of committed batches kept)
                again.append(run(["ls", prefix, "--json"], env))
            warm_requests, cpu[1] = Counter(m for m, _ in got), server_cpu(server) - before
        r, r2 = statistics.median(remote), statistics.median(again)
        print(f"ls of {FLEET} checkpoints, local folder: {ls_local:6.2f} s")
        print(
            f"ls of {FLEET} checkpoints, S3 cold:      {r:6.2f} s  ({r / ls_local:.1f}x local; target < 5 s) requests {dict(cold_requests)}"
            f"; the S3 server's CPU {cpu[0]:.1f} s"
        )
        print(
            f"ls of {FLEET} checkpoints, S3 warm:      {r2:6.2f} s  ({r2 / ls_local:.1f}x local; target < 5 s) requests {dict(warm_requests)}"
            f"; the S3 server's CPU {cpu[1]:.1f} s"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
