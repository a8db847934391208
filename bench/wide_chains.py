"""The wide run of generated chains (``tests/pipegen/chains.py``): each seed's 2-4 queries through
JSON, CSV and Parquet tables (the last through foreachBatch too) run for real, then every designed
key asked across the chain (native, with and without the event log) and scored against the files
Spark wrote and read, end to end and query by query. Prints the table the docs keep.

    .venv/bin/python bench/wide_chains.py --seeds 100-119 [--work /tmp/chains-wide] [--table FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from pipegen.__main__ import seeds  # noqa: E402
from pipegen.chains import wide  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="100-119")
    ap.add_argument("--work", default="/tmp/chains-wide", help="the runs (kept: a second call checks them again)")
    ap.add_argument("--table", default=None, help="write the table as Markdown to this file")
    a = ap.parse_args()
    return wide([int(s) for s in seeds(a.seeds)], Path(a.work), Path(a.table) if a.table else None)


if __name__ == "__main__":
    sys.exit(main())
