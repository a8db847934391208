"""A key's fate through the whole query, as a user runs it: ``cli.py why-missing`` as a whole
process, cold (no served engine, native reader), on the bundled samples that keep their event
log and input files; against the single-operator answer of the same key (``--operator N``) in the
same run. The whole-query answer adds the event log (plan, progress), the search of every input
file each batch read and a state read per operator on the key's way. Target: under 2 s.

A second table times the input search alone, in process, on 100 MB of JSON lines (written once to
``bench/data``): the byte search that parses only the lines holding the key against DuckDB parsing
every file (``read_ndjson_objects``), the plain way to look a value up in JSON files.

    .venv/bin/python bench/bench_fate.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
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


def big_input(files: int = 40, rows: int = 25_000) -> list[str]:
    """Event files as a file source reads them (JSON lines, 100 MB in all), written once to bench/data."""
    import json

    folder = HERE / "data" / "big_input"
    paths = [folder / f"part-{i:05d}.json" for i in range(files)]
    if not all(p.is_file() for p in paths):
        folder.mkdir(parents=True, exist_ok=True)
        for i, p in enumerate(paths):
            p.write_text(
                "".join(
                    json.dumps(
                        {
                            "event_id": f"ev-{i}-{n}",
                            "user_id": f"user-{(i * rows + n) % 100_000}",
                            "kind": "view",
                            "value": n % 7,
                            "event_time": f"2026-01-01T00:{i % 60:02d}:{n % 60:02d}+00:00",
                        }
                    )
                    + "\n"
                    for n in range(rows)
                )
            )
    return [str(p) for p in paths]


def search_alone(runs: int) -> None:
    """The input search in process, on 100 MB of JSON lines: the byte search that parses only the
    lines holding the key, against DuckDB parsing every file (the plain way to find a value in them)."""
    import duckdb

    from spark_io.gather.inputs import ListedFile, _exact

    paths = big_input()
    files = [ListedFile(0, "events", i, p, p, "json") for i, p in enumerate(paths)]
    key = "user-4242"
    found = _exact(files, [key], ["user_id"])
    ours = median_seconds(lambda: _exact(files, [key], ["user_id"]), runs)
    con = duckdb.connect()
    sql = "SELECT filename, json FROM read_ndjson_objects(?, filename = true) WHERE json_extract_string(json, '$.user_id') = ?"
    theirs_rows = con.execute(sql, [paths, key]).fetchall()
    theirs = median_seconds(lambda: con.execute(sql, [paths, key]).fetchall(), runs)
    size = sum(os.path.getsize(p) for p in paths) / 1e6
    print(
        f"\ninput search in process: {len(paths)} JSON files, {size:.0f} MB, key {key} ({len(found)} records; DuckDB: {len(theirs_rows)})"
    )
    print(f"  byte search, parse the lines that hold it   {ours:7.2f} s")
    print(f"  DuckDB parsing every file                   {theirs:7.2f} s   ({theirs / ours:.1f}x ours)")


if __name__ == "__main__":
    main()
