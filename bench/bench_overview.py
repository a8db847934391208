"""Overview of a 1,000-batch checkpoint: State Lens's log reader (no JVM) vs the notebook way.

The checkpoint is built from a real sample: its state/ folder and metadata, and 1,000
offsets/commits files in the exact format Spark wrote for that sample (watermark, timestamp
and captured conf advancing per batch). The plain approach, measured in the same run, is
what a notebook does: a warm SparkSession reading offsets/ and commits/ with the text
reader and parsing the JSON lines. Prints medians and the ratio.

    .venv/bin/python bench/bench_overview.py [--batches 1000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from timing import median_seconds  # noqa: E402

from statelens.analysis.checkpoint.overview import overview_dict  # noqa: E402
from statelens.spark_io.logs.checkpoint import read_checkpoint  # noqa: E402


def build(dest: Path, batches: int) -> None:
    src = ROOT / "sample_checkpoints" / "join_hdfs"
    shutil.copytree(src / "state", dest / "state")
    shutil.copy(src / "metadata", dest / "metadata")
    head, meta, *offsets = (src / "offsets" / "1").read_text().split("\n")
    base = json.loads(meta)
    for d in ("offsets", "commits"):
        (dest / d).mkdir()
    for b in range(batches):
        m = dict(
            base, batchWatermarkMs=base["batchWatermarkMs"] + b * 60_000, batchTimestampMs=base["batchTimestampMs"] + b * 1000
        )
        (dest / "offsets" / str(b)).write_text("\n".join([head, json.dumps(m), *offsets]))
        (dest / "commits" / str(b)).write_text(f'v1\n{{"nextBatchWatermarkMs":{m["batchWatermarkMs"] + 60_000}}}')


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="statelens-bench-") as tmp:
        cp = Path(tmp) / "cp"
        build(cp, args.batches)

        def statelens() -> None:
            data = overview_dict(read_checkpoint(str(cp)))
            assert len(data["batches"]) == args.batches

        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import functions as F

        from statelens.spark_io.runtime.session import get_spark

        spark = get_spark()

        def notebook() -> None:
            offsets = (
                spark.read.text(str(cp / "offsets"), wholetext=True)
                .select(F.input_file_name().alias("f"), F.split("value", "\n").getItem(1).alias("meta"))
                .select("f", F.get_json_object("meta", "$.batchWatermarkMs").alias("wm"))
            )
            commits = spark.read.text(str(cp / "commits"), wholetext=True).select(F.input_file_name().alias("c"))
            rows = offsets.collect()
            committed = {r["c"].rsplit("/", 1)[1] for r in commits.collect()}
            assert len(rows) == args.batches and len(committed) == args.batches

        notebook()  # warm-up: JIT, file listing caches
        statelens()
        t_ours = median_seconds(statelens, args.runs)
        t_plain = median_seconds(notebook, args.runs)
    print(f"overview of a {args.batches}-batch checkpoint, median of {args.runs} runs")
    print(f"  State Lens log reader (no JVM): {t_ours * 1000:8.1f} ms   target < 1000 ms: {'met' if t_ours < 1 else 'NOT met'}")
    print(f"  notebook (warm Spark text read): {t_plain * 1000:8.1f} ms")
    print(f"  ratio notebook / State Lens:     {t_plain / t_ours:8.1f}x")


if __name__ == "__main__":
    main()
