"""What the gate costs a user: a whole-query why-missing as a whole CLI process, cold, on a
checkpoint of over a thousand state files, once with nothing bounding the reads and once with
STATELENS_ALLOWED_ROOTS set (every file opened checked where it really is, every listing's links
checked): the two in turn, run after run, medians and the ratio of each pair. Target: at most 1.05.

    .venv/bin/python bench/bench_gate.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from big_checkpoints import agg_files  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    cp = agg_files()
    files = sum(1 for p in (cp / "state").rglob("*") if p.is_file())
    cmd = [sys.executable, str(ROOT / "cli.py"), "why-missing", str(cp), "user-64001", "user-7", "--json"]
    plain = {k: v for k, v in os.environ.items() if k not in ("STATELENS_ALLOWED_ROOTS", "STATELENS_POLICY")}
    gated = plain | {"STATELENS_ALLOWED_ROOTS": str(cp.parent)}

    def timed(env: dict[str, str]) -> float:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return time.perf_counter() - t0

    timed(plain), timed(gated)  # warm the file system's cache: both read the same files after
    pairs = [(timed(plain), timed(gated)) for _ in range(args.runs)]
    a, b = statistics.median(p for p, _ in pairs), statistics.median(g for _, g in pairs)
    ratio = statistics.median(g / p for p, g in pairs)
    print(f"why-missing, whole query, 2 keys, a cold CLI process; {cp.name}: {files:,} state files; {args.runs} pairs")
    print(f"  nothing bounds the reads        median {a:6.3f} s")
    print(f"  STATELENS_ALLOWED_ROOTS (gate)  median {b:6.3f} s")
    print(f"  gated / plain, pair by pair     median {ratio:6.3f}  (target <= 1.05)")


if __name__ == "__main__":
    main()
