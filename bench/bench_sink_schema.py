"""What reading a sink's schema as Spark wrote it costs preflight: a Parquet sink of 1,000 files Spark
wrote (one real file of a committed sample, copied under Spark's own names, each with its own time),
its schema read as Spark reads it (``sink_columns``: the folder listed, the newest file's footer and
Spark's schema in it), beside the plain approach, ``pyarrow.dataset``'s schema of the folder (the
folder listed, the first file's footer: Arrow's reading, INT96 timestamps naive where Spark reads
``timestamp``). Medians over runs, and the ratio. Target: at most 50 ms for 1,000 files.

    .venv/bin/python bench/bench_sink_schema.py [--files 1000] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "sample_checkpoints" / "generated" / "payments_refunds_merchant" / "sink"


def sink_of(n: int, where: Path) -> Path:
    """A folder of ``n`` copies of one Parquet file Spark wrote, named and timed as Spark's would be."""
    source = next(p for p in sorted(SAMPLE.glob("*.parquet")) if p.stat().st_size)
    folder = where / "sink"
    folder.mkdir()
    for i in range(n):
        target = folder / f"part-{i % 2:05d}-{uuid.UUID(int=i)}-c000.snappy.parquet"
        shutil.copyfile(source, target)
        os.utime(target, (1_767_225_600 + i, 1_767_225_600 + i))
    return folder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    import pyarrow.dataset as ds

    from statelens.spark_io.preflight.sink import sink_columns

    with tempfile.TemporaryDirectory() as tmp:
        folder = sink_of(args.files, Path(tmp))
        wanted = {"fields": [{"name": "merchant", "type": "string"}]}

        def ours() -> object:
            return sink_columns({"path": str(folder), "format": "parquet"}, wanted)

        def plain() -> object:
            return ds.dataset(str(folder), format="parquet").schema

        times: dict[str, list[float]] = {"sink_columns": [], "pyarrow dataset schema": []}
        for _ in range(args.runs):
            for name, fn in (("sink_columns", ours), ("pyarrow dataset schema", plain)):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        stored = ours()
        assert stored is not None
        print(f"{args.files:,} Parquet files Spark wrote; {args.runs} runs each, in turn")
        for name, ts in times.items():
            print(
                f"  {name:<24} median {statistics.median(ts) * 1000:7.1f} ms  (min {min(ts) * 1000:.1f}, max {max(ts) * 1000:.1f})"
            )
        ratio = statistics.median(times["sink_columns"]) / statistics.median(times["pyarrow dataset schema"])
        print(f"  ratio sink_columns / plain: {ratio:.2f}; Spark's types read: {dict(stored[0])}")


if __name__ == "__main__":
    main()
