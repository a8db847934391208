"""A class-data-sharing archive of the classes a Spark session loads, for every JVM the tests start.

A JVM that maps Spark's classes from the archive instead of loading and verifying them from the jars
starts in about half the CPU (a session, a small query and a stop: 13 -> 7 CPU s here) and 5 s sooner;
the suite starts a JVM for its session per worker, for each CLI command run on Spark, each job a
preflight or rebuild runs, each Connect server and pipeline. Nothing else changes: the same classes,
only mapped. Made once per JDK, PySpark and its jars (about 20 s, under ``.tools/``, kept across
runs); a JVM whose class path differs (a pipeline's own conf folder first) does without it, silently.

Hadoop's local file system, built without libhadoop (PySpark ships none), starts a ``chmod`` for every
file it creates and a ``readlink`` for every link status: about 60,000 processes a run (a job of two
3-batch aggregations reading back their state: 515 processes, 16.0 CPU s; with these classes 27 and
13.2 CPU s, medians of 4). ``tests/jvm/InProcessLocalFs.java`` makes the same calls in the JVM, as
libhadoop would; compiled once (``javac``, a second) into a jar with the core-site.xml that names it,
appended to every JVM's class path (``SPARK_DIST_CLASSPATH``). The same files, permissions and
statuses; without a JDK's ``javac``, the tests run on Hadoop's own.
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
import zipfile
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


def spark_env() -> dict[str, str]:
    """The environment of every spark-submit of the tests: the JVM options (with the archive when it
    can be had) and the in-process local file system on the class path (when it can be compiled)."""
    java = _java()
    if java is None:
        return {"SPARK_SUBMIT_OPTS": BASE}  # no JVM here (the fast lane): nothing to archive or compile
    FOLDER.mkdir(parents=True, exist_ok=True)
    archive = FOLDER / f"spark-{_key(java)}.jsa"
    with open(FOLDER / "lock", "w") as lock:  # the first process makes them; the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            _make(archive)
        local_fs = _local_fs(java)
    env = {"SPARK_SUBMIT_OPTS": f"{BASE} -XX:SharedArchiveFile={archive}" if archive.exists() else BASE}
    if local_fs is not None:
        env["SPARK_DIST_CLASSPATH"] = str(local_fs)
    return env


def _make(archive: Path) -> None:
    """Run the workload in a JVM that writes the classes it loaded at its exit; kept only when whole."""
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{BASE} -XX:ArchiveClassesAtExit={partial}"}
    with tempfile.TemporaryDirectory(prefix="statelens-cds-") as cwd, contextlib.suppress(subprocess.SubprocessError):
        subprocess.run([sys.executable, "-c", WORKLOAD], cwd=cwd, env=env, capture_output=True, timeout=600, check=True)
    if partial.exists() and partial.stat().st_size > 0:
        partial.replace(archive)


LOCAL_FS = Path(__file__).resolve().parent / "jvm" / "InProcessLocalFs.java"
CORE_SITE = """<?xml version="1.0"?>
<configuration>
  <property><name>fs.file.impl</name><value>statelens.tests.InProcessLocalFs$Checksummed</value></property>
  <property><name>fs.AbstractFileSystem.file.impl</name><value>statelens.tests.InProcessLocalFs$Fs</value></property>
</configuration>
"""


def _local_fs(java: str) -> Path | None:
    """The jar of the in-process local file system, compiled against PySpark's Hadoop; None without javac."""
    import pyspark

    javac = Path(java).resolve().parent / "javac"
    hadoop = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    if not javac.exists() or not hadoop:
        return None
    key = hashlib.sha256(LOCAL_FS.read_bytes() + CORE_SITE.encode() + f"{javac}|{hadoop[0]}".encode()).hexdigest()[:16]
    jar = FOLDER / f"local-fs-{key}.jar"
    if jar.exists():
        return jar
    with tempfile.TemporaryDirectory(prefix="statelens-fs-") as out:
        try:
            subprocess.run(
                [str(javac), "-nowarn", "-d", out, "-cp", str(hadoop[0]), str(LOCAL_FS)],
                capture_output=True,
                timeout=300,
                check=True,
            )
        except subprocess.SubprocessError:
            return None
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as z:
            z.writestr("core-site.xml", CORE_SITE)
            for cls in sorted(Path(out).rglob("*.class")):
                z.write(cls, cls.relative_to(out).as_posix())
        partial.replace(jar)
    return jar
