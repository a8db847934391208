"""A key's fate through the whole query, as a user runs it: ``cli.py why-missing`` as a whole
process, cold (no served engine, native reader), on the bundled samples that keep their event
log and input files; against the single-operator answer of the same key (``--operator N``) in the
same run. The whole-query answer adds the event log (plan, progress), the search of every input
file each batch read and a state read per operator on the key's way. Target: under 2 s.

A second table times the input search alone, in process, on the biggest input: the byte search
that parses only the lines holding the key against parsing every file with DuckDB
(``read_ndjson_objects``), the plain way to look a value up in JSON files.

    .venv/bin/python bench/bench_fate.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLES = ROOT / "sample_checkpoints"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from timing import median_seconds  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE",)}
ENV["STATELENS_SERVE_DIR"] = "/nonexistent-statelens-serve"  # never a warm served engine
ENV["STATELENS_ENGINE"] = "native"
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine, compiled modules are kept

# sample, key, the operator whose verdict alone is the single-operator answer
CASES = [
    ("dedup_window_chain", "user-second", 0),
    ("outer_join_clicks", "ad-late-click", 0),
    ("chained_join_agg", "cust-1", 0),
    ("file_sink_agg", "user-0", 0),
    ("join_rocksdb", "ord-154", 0),
    ("windowed_agg", "user-1", 0),
]


def cli(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], env=ENV, capture_output=True, check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    cli("overview", str(SAMPLES / "windowed_agg"))  # compiled modules and numba's cache written once
    print(f"cli.py why-missing, a whole cold process, native reader, median of {args.runs} (seconds)")
    print(f"  {'sample':22} {'key':14} {'whole query':>12} {'one operator':>13} {'ratio':>6}")
    worst = 0.0
    for name, key, op in CASES:
        cp, log, inputs = SAMPLES / name, SAMPLES / "event_logs" / name, SAMPLES / "inputs" / name
        whole = ["why-missing", str(cp), key, "--event-log", str(log), "--input-root", str(inputs), "--json"]
        if (SAMPLES / "sinks" / name).is_dir():
            whole += ["--sink", str(SAMPLES / "sinks" / name)]
        single = ["why-missing", str(cp), key, "--operator", str(op), "--json"]
        w = median_seconds(lambda whole=whole: cli(*whole), args.runs)
        s = median_seconds(lambda single=single: cli(*single), args.runs)
        worst = max(worst, w)
        print(f"  {name:22} {key:14} {w:11.2f}s {s:12.2f}s {w / s:5.2f}x")
    print(f"target: every whole-query answer under 2 s: {'met' if worst < 2 else 'NOT met'} (slowest {worst:.2f} s)")
    search_alone(args.runs)


def search_alone(runs: int) -> None:
    """The input search in process: the byte search against DuckDB parsing every file."""
    import duckdb

    from spark_io.checkpoint import read_checkpoint
    from spark_io.inputs import listed_files, search_inputs

    name, key, column = "dedup_window_chain", "user-second", "user_id"
    info = read_checkpoint(str(SAMPLES / name))
    root = str(SAMPLES / "inputs" / name)
    files = [f.path for f in listed_files(info, root)[0] if f.path]
    ours = median_seconds(lambda: search_inputs(info, [key], [column], root), runs)
    con = duckdb.connect()

    def plain() -> None:
        con.execute(
            "SELECT filename, json FROM read_ndjson_objects(?, filename = true) WHERE json_extract_string(json, '$.user_id') = ?",
            [files, key],
        ).fetchall()

    theirs = median_seconds(plain, runs)
    t0 = time.perf_counter()
    found = search_inputs(info, [key], [column], root)
    print(f"\ninput search in process, {len(files)} files of {name}, key {key} ({len(found.records)} records found)")
    print(f"  byte search, parse the lines that hold it   {ours * 1000:8.1f} ms")
    print(f"  DuckDB parsing every file                   {theirs * 1000:8.1f} ms   ({theirs / ours:.1f}x ours)")
    del t0


if __name__ == "__main__":
    main()
