"""Per-batch progress of one query from its Spark event log: `cli.py progress` as a whole process
against the plain approach, a PySpark script that reads the log with `spark.read.json` and picks
the query's QueryProgressEvent records (what a notebook does), in the same run (medians).

The logs: the bundled `dedup` sample's real event log, plus `--copies` copies of another
application's log (the `windowed_agg` sample's rolling folder) beside it in one
spark.eventLog.dir, so the query is found among many applications as on a History Server. All
uncompressed: `spark.read.json` cannot read the zstd, lz4 or snappy streams Spark writes (they
are not Hadoop codec files), which State Lens reads.

    .venv/bin/python bench/bench_progress.py [--runs 3] [--copies 20]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from timing import median_seconds  # noqa: E402

LOGS = ROOT / "sample_checkpoints" / "event_logs"
PLAIN = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.sql.caseSensitive", "true").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
qid = open(sys.argv[2] + "/metadata").read().split('"id":"')[1].split('"')[0]
df = spark.read.option("recursiveFileLookup", "true").json(sys.argv[1])
rows = df.where("Event = 'org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent'") \\
    .where(f"progress.id = '{qid}'").select("progress.batchId", "progress.stateOperators").collect()
print(len(rows))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", type=int, default=20)
    args = ap.parse_args()
    cp = ROOT / "sample_checkpoints" / "dedup"
    with tempfile.TemporaryDirectory(prefix="statelens-bench-eventlogs-") as tmp:
        root = Path(tmp)
        shutil.copy(next((LOGS / "dedup").iterdir()), root)
        other = next((LOGS / "windowed_agg").iterdir())
        for i in range(args.copies):
            shutil.copytree(other, root / f"eventlog_v2_copy{i}")
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        script = root.parent / f"{root.name}-plain.py"
        script.write_text(PLAIN)
        ours = [sys.executable, str(ROOT / "cli.py"), "progress", str(cp), "--event-log", str(root), "--json"]
        plain = [sys.executable, str(script), str(root), str(cp)]
        t_ours = median_seconds(lambda: subprocess.run(ours, check=True, capture_output=True), args.runs)
        t_plain = median_seconds(lambda: subprocess.run(plain, check=True, capture_output=True), args.runs)
        script.unlink()
    print(
        f"progress of dedup's query among {args.copies + 1} applications' event logs ({size / 1e6:.1f} MB), whole process, median seconds"
    )
    print(f"  plain: spark.read.json over the logs   {t_plain:6.2f} s  1.00x")
    print(f"  cli.py progress (no JVM)               {t_ours:6.2f} s  {t_ours / t_plain:5.2f}x ({t_plain / t_ours:.1f}x faster)")


if __name__ == "__main__":
    main()
