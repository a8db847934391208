"""A cold one-operator key lookup, the whole `statelens` process, beside the plain floor.

`statelens why-missing sample_checkpoints/dedup ev-100 --operator 0 --json` (with and without the
near-miss search) against the least any answer costs: a Python process that imports pyarrow and
reads the key's state partition's files. The two run in turn (A B A B ...) so the ratio holds on
a noisy machine; medians. Target: the lookup <= 0.3 s.

    .venv/bin/python bench/bench_lookup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_checkpoints" / "dedup"
STATELENS = Path(sys.executable).parent / "statelens"  # the README's installed command

FLOOR = textwrap.dedent(
    f"""
    import glob, json, os
    import pyarrow
    n = 0
    for f in sorted(glob.glob({str(SAMPLE / "state" / "0" / "0")!r} + "/**", recursive=True)):
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                n += len(fh.read())
    print(json.dumps({{"bytes": n}}))
    """
)


def seconds(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: bytecode kept
    env["STATELENS_ENGINE"] = "native"
    floor_cmd = [sys.executable, "-c", FLOOR]
    print(f"cold processes on {SAMPLE.name}, key ev-100, operator 0; medians of {args.runs} alternating pairs")
    for label, extra in (("without near misses", ["--no-near-misses"]), ("with near misses (default)", [])):
        cmd = [str(STATELENS), "why-missing", str(SAMPLE), "ev-100", "--operator", "0", "--json", *extra]
        seconds(cmd, env), seconds(floor_cmd, env)  # compiled modules written, files in the page cache
        ours, floor = [], []
        for _ in range(args.runs):
            ours.append(seconds(cmd, env))
            floor.append(seconds(floor_cmd, env))
        ratio = statistics.median(o / f for o, f in zip(ours, floor, strict=True))
        o = statistics.median(ours)
        verdict = "met" if o <= 0.3 else "NOT met"
        print(
            f"  lookup {label:27s} {o:6.3f} s  floor {statistics.median(floor):6.3f} s  "
            f"{ratio:5.2f}x the floor (target <= 0.3 s: {verdict})"
        )


if __name__ == "__main__":
    main()
