"""After the verdict: ``statelens rebuild`` of a 6-batch checkpoint, whole CLI processes, medians.

The checkpoint is written by ``tests/jobs/changed_job.py`` (its first version, over 6 input files,
a batch each). The rebuild for the changed job (a key added: the change fails a real restart)
replays those batches into a new checkpoint, against the plain approach in the same run: the
changed job run from the start over the same 6 files into a new checkpoint (one process each).
Target: the rebuild within 1.5x of the plain run (issue 42).

    .venv/bin/python bench/bench_rebuild.py [--runs 3] [--query windowed_agg --change key_added]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_preflight import ROOT, cj, job, timed

BATCHES = 6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--query", default="windowed_agg")
    ap.add_argument("--change", default="key_added")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for b in range(BATCHES):
            cj.write_input(root / "in", b)

        def command(change: str, checkpoint: Path) -> list[str]:
            return [a if a != "windowed_agg" else args.query for a in job(change, root / "in", checkpoint, root / "out")]

        timed(command("none", root / "old"))
        ours, plain = [], []
        for i in range(args.runs):
            new, fresh = root / f"new-{i}", root / f"fresh-{i}"
            ours.append(timed([sys.executable, str(ROOT / "cli.py"), "rebuild", str(root / "old"), "--to", str(new), "--json",
                               "--", *command(args.change, root / "old")]))  # fmt: skip
            plain.append(timed(command(args.change, fresh)))
            shutil.rmtree(new)
            shutil.rmtree(fresh)
        a, b = statistics.median(ours), statistics.median(plain)
        print(f"rebuild of {BATCHES} batches ({args.query}, {args.change}), whole processes, median of {args.runs}:")
        print(f"  statelens rebuild        {a:6.2f} s")
        print(f"  the changed job from 0   {b:6.2f} s")
        print(f"  ratio                    {a / b:6.2f}x  (target <= 1.5x: {'met' if a / b <= 1.5 else 'NOT met'})")


if __name__ == "__main__":
    main()
