"""A key across a pipeline, and the graph of a root holding many checkpoints, against the plain way;
medians of whole processes, ratios from the same run (this machine is noisy).

1. ``cli.py why-missing ROOT KEY --key-field customer`` on the committed Declarative Pipeline
   (bronze -> silver -> gold, three hops' worth of queries: a whole process, native, with the event
   logs) against a plain PySpark script that reads silver's and gold's state for the key with the
   State Data Source and joins them by hand. Target <= 3 s.
2. ``cli.py pipeline ROOT`` over a root holding 100 checkpoints (the committed pipeline's four
   flows copied into 25 storage roots, each with its own warehouse) against a plain Python script
   that lists them and reads each one's logs (``os.walk`` and every offsets/commits file). Target <= 2 s.

    .venv/bin/python bench/bench_pipeline.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from timing import median_seconds  # noqa: E402

ORDERS = ROOT / "sample_checkpoints" / "sdp" / "orders"
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # cold, as a user's second run is: byte code kept


def cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args], env=ENV, capture_output=True, text=True, check=True
    ).stdout


def pyspark(script: str) -> str:
    prelude = textwrap.dedent(
        """
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)], env=ENV, capture_output=True, text=True, check=True
    ).stdout


def row(what: str, ours: float, plain: float, target: float) -> None:
    verdict = "met" if ours <= target else "NOT met"
    print(f"  {what:62s} {ours:6.2f} s  vs {plain:6.2f} s  {plain / ours:5.1f}x (target <= {target:g} s: {verdict})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"medians of {args.runs} whole processes")
    storage, wh = str(ORDERS / "storage"), str(ORDERS / "warehouse")
    key_args = ("why-missing", storage, "frank", "--key-field", "customer", "--data-root", wh)
    key_args += ("--input-root", str(ORDERS / "inputs"), "--event-log", str(ORDERS / "event_log"), "--json")
    assert '"waiting_for_watermark"' in cli(*key_args)
    ours = median_seconds(lambda: cli(*key_args), args.runs)
    base = f"{storage}/_checkpoints/spark_catalog/default"
    by_hand = f"""
        silver = spark.read.format("statestore").load("{base}/silver/silver/0").where("key.order_id = 'o8'")
        gold = spark.read.format("statestore").load("{base}/gold/gold/1").where("key.customer = 'frank'")
        print(silver.count(), gold.count(), gold.select("key.window").collect())
        """
    plain = median_seconds(lambda: pyspark(by_hand), 1)
    row("one key across the pipeline (cli.py, native, event logs)", ours, plain, 3)

    with tempfile.TemporaryDirectory(prefix="statelens-bench-") as tmp:
        for i in range(25):
            shutil.copytree(ORDERS / "storage", Path(tmp) / f"team-{i:02d}" / "storage")
            shutil.copytree(ORDERS / "warehouse", Path(tmp) / f"team-{i:02d}" / "warehouse")
        found = cli("pipeline", tmp)
        assert found.startswith("100 queries"), found[:200]
        ours = median_seconds(lambda: cli("pipeline", tmp), args.runs)
        listing = f"""
            import os
            n = 0
            for d, dirs, files in os.walk({tmp!r}):
                if "offsets" in dirs and "commits" in dirs:
                    for sub in ("offsets", "commits", "sources/0"):
                        for f in os.listdir(os.path.join(d, sub)):
                            if not f.startswith("."):
                                open(os.path.join(d, sub, f)).read()
                    n += 1
            print(n)
            """
        plain = median_seconds(
            lambda: subprocess.run([sys.executable, "-c", textwrap.dedent(listing)], env=ENV, check=True, capture_output=True),
            args.runs,
        )
        row("the graph of a root holding 100 checkpoints (cli.py pipeline)", ours, plain, 2)


if __name__ == "__main__":
    main()
