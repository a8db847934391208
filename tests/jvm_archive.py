"""A class-data-sharing archive of the classes a Spark session loads, for every JVM the tests start.

A JVM that maps Spark's classes from the archive instead of loading and verifying them from the jars
starts in about half the CPU (a session, a small query and a stop: 13 -> 7 CPU s here) and 5 s sooner;
the suite starts a JVM for its session per worker, for each CLI command run on Spark, each job a
preflight or rebuild runs, each Connect server and pipeline. Nothing else changes: the same classes,
only mapped. Made once per JDK, PySpark and its jars (about 20 s, under ``.tools/``, kept across
runs); a JVM whose class path differs (a pipeline's own conf folder first) does without it, silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / ".tools" / "spark-cds"
# the JIT and GC the tests run with (a short life on small data: the quick JIT only, one GC thread);
# CDS's own messages off: a JVM that cannot use the archive says so on stdout, where answers go
BASE = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xlog:cds*=off"

WORKLOAD = r"""
import os, json
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, window
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
tmp = os.getcwd()  # a temporary folder of its own, removed after
src = os.path.join(tmp, "in"); os.makedirs(src)
with open(os.path.join(src, "a.json"), "w") as f:
    for i in range(100):
        f.write(json.dumps({"k": f"k{i % 7}", "ts": f"2026-01-01T00:{i % 60:02d}:00"}) + "\n")
for provider in ("hdfs", "rocksdb"):
    if provider == "rocksdb":
        spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    cp = os.path.join(tmp, "cp-" + provider)
    df = (spark.readStream.schema("k string, ts timestamp").json(src).withWatermark("ts", "1 minute")
          .groupBy(window(col("ts"), "5 minutes"), col("k")).count())
    q = (df.writeStream.format("parquet").option("path", os.path.join(tmp, "out-" + provider))
         .option("checkpointLocation", cp).outputMode("append").trigger(availableNow=True).start())
    q.awaitTermination()
    spark.read.format("statestore").load(cp).count()
    spark.read.format("state-metadata").load(cp).count()
    spark.read.parquet(os.path.join(tmp, "out-" + provider)).count()
spark.stop()
# the JVM writes the archive as it exits: end it and wait, so the archive is whole when this process ends
SparkContext._gateway.shutdown()
SparkContext._gateway.proc.stdin.close()
SparkContext._gateway.proc.wait(timeout=300)
"""


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return str(java) if java.exists() else None
    return shutil.which("java")


def _key(java: str) -> str:
    """What the archive is valid for: the JDK, PySpark's jars (names, sizes, times) and the options."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    h = hashlib.sha256(f"{Path(java).resolve()}|{pyspark.__version__}|{BASE}".encode())
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        h.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def spark_submit_opts() -> str:
    """The JVM options for every spark-submit of the tests: with the archive when it can be had."""
    java = _java()
    if java is None:
        return BASE  # no JVM here (the fast lane): nothing to archive
    FOLDER.mkdir(parents=True, exist_ok=True)
    archive = FOLDER / f"spark-{_key(java)}.jsa"
    with open(FOLDER / "lock", "w") as lock:  # the first process makes it; the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            _make(archive)
    return f"{BASE} -XX:SharedArchiveFile={archive}" if archive.exists() else BASE


def _make(archive: Path) -> None:
    """Run the workload in a JVM that writes the classes it loaded at its exit; kept only when whole."""
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{BASE} -XX:ArchiveClassesAtExit={partial}"}
    with tempfile.TemporaryDirectory(prefix="statelens-cds-") as cwd, contextlib.suppress(subprocess.SubprocessError):
        subprocess.run([sys.executable, "-c", WORKLOAD], cwd=cwd, env=env, capture_output=True, timeout=600, check=True)
    if partial.exists() and partial.stat().st_size > 0:
        partial.replace(archive)
