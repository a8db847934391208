"""A key's fate through the whole query, as a user runs it: ``cli.py why-missing`` as a whole
process, cold (no served engine, native reader), on the bundled samples that keep their event
log and input files and on the five pipelines (``sample_checkpoints/pipelines``); against the
single-operator answer of the same key (``--operator N``) in the same run. The whole-query answer
adds the event log (plan, progress), the search of every input file each batch read, a state read
per operator on the key's way, the other side's records of a join row that never matched, the
sink's files and the look-alikes' own fates. Targets: one key under 1.5 s, ten keys in one call
under 2 s.

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

PIPELINES = SAMPLES / "pipelines"
# pipeline, one key, ten keys in one call
PIPELINE_CASES = [
    (
        "ad_campaigns",
        "camp-dup",
        [
            "camp-a",
            "camp-dup",
            "camp-late",
            "camp-bot",
            "camp-far",
            "camp-none",
            "camp-part",
            "camp-wait",
            "camp-trail",
            "camp-case",
        ],
    ),
    (
        "user_sessions",
        "u-late",
        ["u-closed", "u-two", "u-late", "u-mixed", "u-health", "u-open", "u-busy", "u-x", "U-OPEN", "u-3"],
    ),
    (
        "window_rollup",
        "u-second",
        ["u-full", "u-late", "u-second", "u-viewer", "u-wait15", "u-steady", "u-x", "U-FULL", "u-1", "u-2"],
    ),
    (
        "orders_shipments",
        "ord-lateship",
        ["ord-0", "ord-5", "ord-unshipped", "ord-lateship", "ord-free", "ord-wait", "store-1", "store-2", "store-3", "ORD-9"],
    ),
    ("user_timeouts", "u-back", ["u-done", "u-late", "u-back", "u-steady", "u-gone", "U-DONE", "u-1", "u-2", "u-3", "u-4"]),
]
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
    pipelines(args.runs)
    search_alone(args.runs)


def pipelines(runs: int) -> None:
    """The five pipelines: one key, ten keys in one call, and operator 0's verdict of the one key."""
    print(f"\nthe pipelines, cli.py why-missing as a whole cold process, median of {runs} (seconds)")
    print(f"  {'pipeline':18} {'one key':>8} {'ten keys':>9} {'one operator':>13} {'ratio':>6}")
    one_worst = ten_worst = 0.0
    for name, key, keys in PIPELINE_CASES:
        folder = PIPELINES / name
        common = ["--event-log", str(folder / "event_log"), "--input-root", str(folder / "inputs"), "--json"]
        if (folder / "sink").is_dir():
            common += ["--sink", str(folder / "sink")]
        cp = str(folder / "checkpoint")
        one_call = ["why-missing", cp, key, *common]
        ten_call = ["why-missing", cp, *keys, *common]
        single_call = ["why-missing", cp, key, "--operator", "0", "--json"]
        one = median_seconds(lambda a=one_call: cli(*a), runs)  # type: ignore[misc]
        ten = median_seconds(lambda a=ten_call: cli(*a), runs)  # type: ignore[misc]
        single = median_seconds(lambda a=single_call: cli(*a), runs)  # type: ignore[misc]
        one_worst, ten_worst = max(one_worst, one), max(ten_worst, ten)
        print(f"  {name:18} {one:7.2f}s {ten:8.2f}s {single:12.2f}s {one / single:5.2f}x")
    print(f"target: one key under 1.5 s: {'met' if one_worst < 1.5 else 'NOT met'} (slowest {one_worst:.2f} s)")
    print(f"target: ten keys under 2 s: {'met' if ten_worst < 2 else 'NOT met'} (slowest {ten_worst:.2f} s)")


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

    from statelens.spark_io.gather.inputs import ListedFile, _exact

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
