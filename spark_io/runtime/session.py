"""The one SparkSession of State Lens: created lazily, on first use, and reused.

Local Spark (``local[*]``) by default. ``configure(master=...)`` or ``configure(remote=...)``
(or the ``SPARK_REMOTE`` / ``STATELENS_MASTER`` environment variables) point it at a
cluster or a Spark Connect server instead; nothing else in State Lens creates sessions.
Spark's scratch space (shuffle files, RocksDB working copies) goes to a temporary
folder State Lens owns and removes at exit, never next to a checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

from statelens.analysis.core.errors import SparkUnavailable, option
from statelens.spark_io.runtime import scratch


@dataclass(frozen=True)
class SparkTarget:
    master: str | None = None  # e.g. local[*], spark://host:7077, yarn
    remote: str | None = None  # Spark Connect, e.g. sc://host:15002
    served: bool = False  # the remote is the local warm engine of `cli.py serve`, not a cluster
    adopted: bool = False  # a session the caller started and stops (``adopt``)

    def describe(self) -> str:
        if self.remote:
            return f"Spark Connect {self.remote}"
        return f"Spark {self.master or 'local[*]'}"


LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
_lock = threading.RLock()
_session: Any = None
_target = SparkTarget(master=os.environ.get("STATELENS_MASTER"), remote=os.environ.get("SPARK_REMOTE"))


def configure(master: str | None = None, remote: str | None = None, served: bool = False) -> None:
    """Choose where Spark runs. Stops a session that points elsewhere."""
    global _target, _session
    new = SparkTarget(master=master, remote=remote, served=served)
    with _lock:
        if new != _target and _session is not None:
            if not _target.adopted:
                _session.stop()
            _session = None
            _children.clear()
        _target = new


def adopt(spark: Any) -> None:
    """Use a session the caller already has (a notebook's ``spark``, classic or Spark Connect) for
    every read that needs Spark, instead of starting one; it is the caller's to stop."""
    global _target, _session
    remote = None
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        remote = "sc:// (the notebook's session)"
    with _lock:
        if _session is not None and _session is not spark and not _target.adopted:
            _session.stop()
        _children.clear()
        _session = spark
        _target = SparkTarget(master=None if remote else "the notebook's session", remote=remote, adopted=True)


def target() -> SparkTarget:
    return _target


def java_problem() -> str | None:
    """None when a Java runtime is usable, else what is wrong and how to fix it."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return (
            "Java was not found. Spark needs Java 17 or 21: install it (Debian: "
            "apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"Java at {java} does not run ({e}). Reinstall Java 17 or set JAVA_HOME."
    if out.returncode != 0:
        return f"Java at {java} does not run: {out.stderr.strip()[:200]}"
    return None


def scratch_dir() -> str:
    """Spark's scratch space: a folder of the process's own (``scratch.process_dir``, removed at exit)."""
    folder = os.path.join(scratch.process_dir(), "spark")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def connect_problem(remote: str, timeout: float = 5.0) -> str | None:
    """None when a Spark Connect URL answers on TCP; else what is wrong. (PySpark's client would
    retry an unreachable server for minutes: this check fails fast instead.)"""
    parsed = urllib.parse.urlparse(remote.split(";", 1)[0].rstrip("/"))
    if parsed.scheme != "sc" or not parsed.hostname:
        return f"'{remote}' is not a Spark Connect URL: use sc://host:port (for example sc://localhost:15002)."
    port = parsed.port or 15002
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout):
            return None
    except OSError as e:
        return f"The Spark Connect server at {parsed.hostname}:{port} does not answer ({e.strerror or e}). Is it running?"


def _build() -> Any:
    from pyspark.sql import SparkSession

    if _target.remote:
        problem = connect_problem(_target.remote)
        if problem:
            raise SparkUnavailable(problem)
        return SparkSession.builder.remote(_target.remote).getOrCreate()
    problem = java_problem()
    if problem:
        raise SparkUnavailable(problem)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    scratch = scratch_dir()
    builder = (
        SparkSession.builder.master(_target.master or "local[*]")
        .appName("state-lens")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.local.dir", scratch)
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
        .config(
            "spark.driver.extraJavaOptions",
            f"-Djava.io.tmpdir={scratch} -Dderby.system.home={scratch} -Dlog4j2.configurationFile=file:{LOG4J}",
        )
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # PySpark's DataFrame call-site capture, for Spark's error context: four JVM round trips on
        # every Column and DataFrame call (F.col 1.3 -> 0.4 ms); State Lens says its errors itself
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    if not _target.master or _target.master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    with _java_stderr_to(os.path.join(scratch, "jvm.log")):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextlib.contextmanager
def _java_stderr_to(log_path: str) -> Any:
    """The JVM inherits file descriptor 2 when it starts: point it at a log file for that moment, so
    Spark's start-up lines and Java stack traces stay out of the CLI's stderr and the app's console.
    STATELENS_DEBUG=1 keeps them on stderr."""
    if os.environ.get("STATELENS_DEBUG"):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_thread_tags = threading.local()  # this thread's read, tagged before Spark ran (``tag_thread``)


def tag_thread(tag: str) -> None:
    """Tag this thread's Spark work for cancellation, now if Spark runs, else when this thread starts
    it (a read that needs Spark after all): the tag must not start a JVM for reads that never do."""
    _thread_tags.tag = tag
    if _session is not None:
        _apply_tag(_session, tag)


def thread_tag() -> str | None:
    """This thread's tag (``tag_thread``), if a cancellable read runs in it."""
    return getattr(_thread_tags, "tag", None)


def untag_thread() -> None:
    tag = thread_tag()
    _thread_tags.tag = None
    if tag and _session is not None and _target.remote:
        _session.removeTag(tag)


def _apply_tag(spark: Any, tag: str) -> None:
    if _target.remote:
        spark.addTag(tag)  # Connect: operations of this thread carry the tag
    else:  # classic Spark: a job group (thread-local) is what cancellation reaches
        spark.sparkContext.setJobGroup(tag, "State Lens read", interruptOnCancel=True)


def get_spark() -> Any:
    """The shared SparkSession (started on first call, 7-11 s for local Spark)."""
    global _session
    with _lock:
        if _session is None:
            try:
                _session = _build()
            except SparkUnavailable:
                raise
            except Exception as e:  # JVM failed to start, Connect server unreachable ...
                raise SparkUnavailable(
                    f"{_target.describe()} could not be started: {spark_message(e)[:300]}. "
                    "Check Java 17 (java -version) and, for a cluster, the master or remote URL."
                ) from e
            tag = getattr(_thread_tags, "tag", None)
            if tag:
                _apply_tag(_session, tag)
        return _session


_children: dict[tuple[tuple[str, str], ...], Any] = {}


def spark_for(conf: dict[str, str]) -> Any:
    """The session to read a checkpoint with, given the SQL confs its reads need.

    Local Spark: the shared session when the confs are Spark's defaults, else a child session
    (same SparkContext, its own SQL conf), kept per conf. Spark Connect has no child sessions:
    the confs are set on the session before each read."""
    spark = get_spark()
    if _target.remote:
        for k, v in conf.items():
            spark.conf.set(k, v)
        return spark
    wanted = tuple(sorted((k, v) for k, v in conf.items() if spark.conf.get(k, None) != v))
    if not wanted:
        return spark
    with _lock:
        child = _children.get(wanted)
        if child is None:
            child = spark.newSession()
            for k, v in wanted:
                child.conf.set(k, v)
            _children[wanted] = child
        return child


def driver_limit() -> tuple[int, str]:
    """The most result bytes the driver takes in one collect, and why: ``spark.driver.maxResultSize``
    and a quarter of ``spark.driver.memory``, the smaller. Spark Connect: its server's limits are not
    known here (1 GiB assumed)."""
    if _target.remote:
        return 1 << 30, "1 GiB (a Spark Connect server's own limits are not known here)"
    conf = get_spark().sparkContext.getConf()
    raw_result, raw_memory = conf.get("spark.driver.maxResultSize", "1g"), conf.get("spark.driver.memory", "1g")
    limit = min(_bytes_of(raw_result) or 1 << 62, _bytes_of(raw_memory) // 4)
    return limit, f"spark.driver.maxResultSize={raw_result} and a quarter of spark.driver.memory={raw_memory}"


def _bytes_of(text: str) -> int:
    """Spark's size strings (``512m``, ``1g``, ``0`` for no limit) in bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", text.lower())
    if not m:
        return 1 << 30
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")


def is_running() -> bool:
    return _session is not None


def start_in_background() -> threading.Thread:
    """Start Spark now, in a thread, so the first read does not wait the whole JVM start."""

    def start() -> None:
        with contextlib.suppress(Exception):  # the first real read reports the problem
            get_spark()

    t = threading.Thread(target=start, name="statelens-spark-start", daemon=True)
    t.start()
    return t


def stop() -> None:
    global _session
    with _lock:
        if _session is not None and not _target.adopted:
            _session.stop()
            _session = None
            _children.clear()


# --------------------------------------------------------------------------- Spark's errors, made readable

_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_.]+\][^\n]*")
_PY4J_CALL = re.compile(r"^An error occurred while calling [\w.$]+\.?$")
_MISSING_FS = re.compile(r"No FileSystem for scheme \"?(\w+)|Class (org\.apache\.hadoop\.fs\.[\w.]+|[\w.]+FileSystem) not found")
FS_PACKAGES = {  # the connector each storage needs on Spark's classpath
    "s3a": "org.apache.hadoop:hadoop-aws",
    "abfs": "org.apache.hadoop:hadoop-azure",
    "abfss": "org.apache.hadoop:hadoop-azure",
    "wasbs": "org.apache.hadoop:hadoop-azure",
    "gs": "com.google.cloud.bigdataoss:gcs-connector",
}


def spark_message(e: BaseException, uri: str | None = None) -> str:
    """The informative line of a Spark error: its ``[ERROR_CLASS] ...`` line, else the Java
    exception behind py4j's "An error occurred while calling o47.load" (never that line), and
    for a storage without its filesystem jars, what to add."""
    text = str(e).strip()
    m = _ERROR_CLASS.search(text)
    if m:
        line = m.group(0).strip()
    else:
        lines = [x.strip().lstrip(":").strip() for x in text.splitlines() if x.strip() and not x.startswith(("\tat ", "\t... "))]
        lines = [x for x in lines if x and not _PY4J_CALL.match(x)]
        line = lines[0] if lines else type(e).__name__
        line = re.sub(r"^(java\.lang\.RuntimeException: )+", "", line)
    fs = _MISSING_FS.search(text)
    if fs:
        scheme = fs.group(1) or (urllib.parse.urlparse(uri).scheme if uri else "")
        package = FS_PACKAGES.get(scheme, "<the filesystem connector's Maven coordinates>")
        where = f"{scheme}://" if scheme else "this storage"
        return (
            f"Spark has no filesystem for {where} ({line[:200]}). Give it the connector: start State Lens with "
            f'PYSPARK_SUBMIT_ARGS="--packages {package}:<your Hadoop version> pyspark-shell", '
            f"or point {option('--master')}/{option('--remote')} at a cluster that has it."
        )
    return line[:500]
