"""A Spark Declarative Pipeline run for real with ``spark-pipelines``: orders, bronze -> silver -> gold.

Written to ``sample_checkpoints/sdp/orders/``:

* ``project/``: the pipeline as its team keeps it (``spark-pipeline.yml``, ``transformations/``);
* ``storage/``: the pipeline's storage root: every flow's checkpoint at
  ``_checkpoints/<catalog>/<schema>/<table>/<flow>/<version>/``;
* ``warehouse/``: the streaming tables, Parquet with their ``_spark_metadata`` logs;
* ``inputs/orders/``: the JSON files bronze read, one per run (mtimes set);
* ``event_log/``: the Spark applications' event logs (the pipeline's Connect server and its client);
* ``runs.json``: each ``spark-pipelines run`` as it was called, in order (the truth of what ran).

The flows: ``bronze`` reads the JSON files; ``silver`` (Python) keeps orders with a positive amount and
drops an order id seen before within its 10-minute watermark (a SQL view sets it: ``WATERMARK ts DELAY
OF INTERVAL 10 MINUTES``); ``gold`` (SQL) counts each customer's orders in 5-minute windows, its
watermark 5 minutes behind. The runs: three incremental (one input file each), ``--full-refresh gold``
(gold's checkpoint version 1: it reads silver's whole table again; version 0 is superseded), then a
fourth file with ``--refresh bronze,silver`` (gold lags silver by that batch).

The customers' stories (times are 2026-01-01, minutes past midnight):

* ``alice``: order at 00:01 (run 0): counted in gold's window 00:00-00:05;
* ``bob``: order at 00:02 with amount -5 (run 0): filtered out by silver;
* ``carol``: order ``o3`` at 00:03 (run 0) and again in run 1: the second dropped by silver as a duplicate;
* ``dave``: order at 00:15 in run 2, behind silver's watermark (00:21): dropped as late by silver;
* ``erin``: order at 00:22:30 in run 2: passes silver, behind gold's watermark (window 00:20-00:25 ends
  before 00:26): dropped as late by gold version 0; the full refresh reads it in one batch and counts it;
* ``frank`` (00:33, run 2) and ``heidi`` (00:34, run 4): in gold's window 00:30-00:35, still open
  (frank's in gold's state; heidi's order is in silver, not read by gold yet);
* ``gina``: never in the input.

A developer tool: ``python sample_checkpoints/sdp.py`` (needs Java; CI reads the committed folder, and
``tests/test_sdp.py`` builds a second pipeline of its own)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEST = HERE / "sdp" / "orders"
BUILD = Path(tempfile.gettempdir()) / "statelens-sdp" / "orders"  # the paths the logs hold

BRONZE = """# spark: the pipeline's session, which spark-pipelines gives each file
# ruff: noqa: F821
from pyspark import pipelines as dp


@dp.table(format="parquet")
def bronze():
    return (
        spark.readStream.format("json")
        .schema("order_id STRING, customer STRING, amount DOUBLE, ts TIMESTAMP")
        .load("{inputs}")
    )
"""
SILVER_VIEW = """CREATE TEMPORARY VIEW bronze_watermarked AS
SELECT * FROM STREAM bronze WATERMARK ts DELAY OF INTERVAL 10 MINUTES;
"""
SILVER = """# spark: the pipeline's session, which spark-pipelines gives each file
# ruff: noqa: F821
from pyspark import pipelines as dp


@dp.table(format="parquet")
def silver():
    return spark.readStream.table("bronze_watermarked").where("amount > 0").dropDuplicatesWithinWatermark(["order_id"])
"""
GOLD = """CREATE STREAMING TABLE gold USING parquet AS
SELECT customer, window(ts, '5 minutes') AS w, count(*) AS orders, sum(amount) AS total
FROM STREAM silver WATERMARK ts DELAY OF INTERVAL 5 MINUTES
GROUP BY customer, window(ts, '5 minutes');
"""


def _order(order_id: str, customer: str, amount: float, minute: float) -> dict[str, Any]:
    m, s = int(minute), round((minute - int(minute)) * 60)
    return {"order_id": order_id, "customer": customer, "amount": amount, "ts": f"2026-01-01T00:{m:02d}:{s:02d}Z"}


FILES = [
    [_order("o1", "alice", 10.0, 1), _order("o2", "bob", -5.0, 2), _order("o3", "carol", 7.0, 3), _order("o4", "zed", 1.0, 6)],
    [_order("o3", "carol", 7.0, 3), _order("o5", "zed", 1.0, 31)],
    [_order("o6", "dave", 3.0, 15), _order("o7", "erin", 4.0, 22.5), _order("o8", "frank", 5.0, 33)],
    [_order("o10", "heidi", 2.0, 34), _order("o11", "zed", 1.0, 36)],
]
# (input file written before the run or None, the run's arguments)
RUNS: list[tuple[int | None, list[str]]] = [
    (0, []),
    (1, []),
    (2, []),
    (None, ["--full-refresh", "gold"]),
    (3, ["--refresh", "bronze,silver"]),
]


def write_project(root: Path, inputs: Path) -> None:
    project = root / "project"
    (project / "transformations").mkdir(parents=True)
    (project / "spark-pipeline.yml").write_text(
        f"name: orders\nstorage: file://{root / 'storage'}\nlibraries:\n  - glob:\n      include: transformations/**\n"
    )
    t = project / "transformations"
    (t / "bronze.py").write_text(BRONZE.format(inputs=inputs))
    (t / "silver_watermark.sql").write_text(SILVER_VIEW)
    (t / "silver.py").write_text(SILVER)
    (t / "gold.sql").write_text(GOLD)
    conf = root / "conf"
    conf.mkdir()
    # static confs go to the pipeline's Connect server through spark-defaults.conf; a Hive catalog (Derby)
    # keeps the tables from one run to the next
    (conf / "spark-defaults.conf").write_text(
        "\n".join(
            [
                "spark.sql.catalogImplementation hive",
                f"spark.sql.warehouse.dir {root / 'warehouse'}",
                f"spark.driver.extraJavaOptions -Dderby.system.home={root / 'derby'}",
                "spark.sql.session.timeZone UTC",
                "spark.sql.shuffle.partitions 2",
                "spark.ui.enabled false",
                "spark.eventLog.enabled true",
                f"spark.eventLog.dir file://{root / 'event_log'}",
            ]
        )
        + "\n"
    )
    (root / "event_log").mkdir()


def run_pipeline(root: Path, args: list[str]) -> None:
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_CONF_DIR": str(root / "conf"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        # the pipeline's own Connect server on a port of its own (PySpark's testing switch: an ephemeral
        # port), not 15002, which another server on this machine may hold
        "SPARK_TESTING": "1",
    }
    done = subprocess.run(
        [str(bin_dir / "spark-pipelines"), "run", *args],
        cwd=root / "project",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or "Run is COMPLETED" not in done.stdout + done.stderr:
        raise RuntimeError(f"spark-pipelines run {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-4000:]}")


def build(root: Path, files: list[list[dict[str, Any]]] = FILES, runs: list[tuple[int | None, list[str]]] = RUNS) -> Path:
    """Run the pipeline for real under ``root``: the project, its storage root, tables and inputs."""
    shutil.rmtree(root, ignore_errors=True)
    inputs = root / "inputs" / "orders"
    inputs.mkdir(parents=True)
    write_project(root, inputs)
    done = []
    for i, (file_no, args) in enumerate(runs):
        if file_no is not None:
            path = inputs / f"orders-{file_no:03d}.json"
            path.write_text("".join(json.dumps(r) + "\n" for r in files[file_no]))
            stamp = 1_767_225_600 + 60 * i  # one a minute, in order (the file source orders by mtime)
            os.utime(path, (stamp, stamp))
        run_pipeline(root, args)
        done.append({"run": i, "input_file": None if file_no is None else f"orders-{file_no:03d}.json", "args": args})
    (root / "runs.json").write_text(json.dumps(done, indent=1) + "\n")
    return root


def main() -> None:
    build(BUILD)
    shutil.rmtree(DEST, ignore_errors=True)
    DEST.parent.mkdir(parents=True, exist_ok=True)
    # the metastore and the spec's local confs stay behind: what a user has is the storage root and tables
    shutil.copytree(BUILD, DEST, ignore=shutil.ignore_patterns("derby", "conf", "metastore_db", "__pycache__"))
    print(f"wrote {DEST}")


if __name__ == "__main__":
    main()
