"""A CLI command as a whole process: cold (starts its own JVM) against warm (`cli.py serve`).

Times `cli.py why-missing` on the bundled join sample end to end (medians), once with no
served engine and once after `cli.py serve`; the ratio is the point. Goal: warm under 3 s.

    .venv/bin/python bench/bench_cli.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from timing import median_seconds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    env["STATELENS_SERVE_DIR"] = tempfile.mkdtemp(prefix="statelens-bench-serve-")
    cmd = [sys.executable, str(ROOT / "cli.py"), "why-missing", str(ROOT / "sample_checkpoints" / "join_hdfs"), "ord-154"]

    def run() -> None:
        subprocess.run(cmd, env=env, check=True, capture_output=True)

    cold = median_seconds(run, max(1, args.runs // 2))
    subprocess.run([sys.executable, str(ROOT / "cli.py"), "serve"], env=env, check=True, capture_output=True)
    try:
        run()  # the server's first query warms it up
        warm = median_seconds(run, args.runs)
    finally:
        subprocess.run([sys.executable, str(ROOT / "cli.py"), "serve", "--stop"], env=env, capture_output=True)
    print("cli.py why-missing on join_hdfs, whole process, median seconds")
    print(f"  cold (own JVM)                 {cold:6.2f} s  1.00x")
    print(f"  warm (after cli.py serve)      {warm:6.2f} s  {warm / cold:5.2f}x")
    print(f"goal: warm under 3 s: {'met' if warm < 3 else 'NOT met'} ({cold / warm:.1f}x faster)")


if __name__ == "__main__":
    main()
