"""Runs a pipeline for real and keeps what it did, in one folder:

* ``inputs/<source>/part-<batch>.<fmt>``: one file per batch (mtimes set: the file source reads by them);
* ``inputs/<table>/``: the static table, when the pipeline joins one (beside the streaming sources);
* ``checkpoint/``: the query's checkpoint (what State Lens opens);
* ``sink/``: the file sink with its ``_spark_metadata`` log;
* ``event_log/``: the Spark application's event log (the plan per batch, the progress);
* ``progress.json``: ``query.recentProgress`` (Spark's own report of each batch);
* ``pipeline.json`` and ``query.txt``: the pipeline, and the code that ran it.

The query runs in a Spark application of its own (its event log holds only it): ``run_in_process``
from a subprocess (``python -m pipegen run``), as ``generate`` does."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipegen.build import WRITTEN
from pipegen.spec import HDFS, ROCKSDB, Pipeline, Source

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
BASE_MTIME = 1_767_225_600  # 2026-01-01: file i gets mtime base + i
TESTS = Path(__file__).resolve().parent.parent


def when(minute: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minute)


def input_row(row: dict[str, Any], s: Source) -> dict[str, Any]:
    """A designed row as its file holds it: the design's notes dropped, the time as a timestamp (or the
    number since the epoch the query makes it of)."""
    out = {k: v for k, v in row.items() if not k.startswith("_")}
    t = when(out[s.cols["time"]])
    out[s.cols["time"]] = s.epoch_number(t) if s.time_unit else t
    return out


def write_file(path: Path, ddl: str, rows: list[dict[str, Any]], fmt: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [c.split()[0] for c in ddl.split(", ")]
    if fmt == "json":
        text = "".join(
            json.dumps({k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in r.items()}) + "\n" for r in rows
        )
        path.write_text(text)
    elif fmt == "csv":

        def cell(v: Any) -> str:
            if v is None:
                return ""
            if isinstance(v, bool):
                return "true" if v else "false"
            return v.isoformat() if isinstance(v, dt.datetime) else str(v)

        path.write_text("\n".join([",".join(names)] + [",".join(cell(r.get(n)) for n in names) for r in rows]) + "\n")
    else:
        types = {"STRING": pa.string(), "BIGINT": pa.int64(), "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us", "UTC")}
        fields = [(c.split()[0], types[c.split()[1]]) for c in ddl.split(", ")]

        def typed(v: Any, t: Any) -> Any:  # a parquet column has one type: a number's text in a BIGINT column is the number
            return int(v) if t == pa.int64() and isinstance(v, str) else v

        table = pa.table({n: pa.array([typed(r.get(n), t) for r in rows], t) for n, t in fields}, schema=pa.schema(fields))
        pq.write_table(table, path)


def write_inputs(p: Pipeline, root: Path, batches: range | None = None) -> None:
    """The input files of ``batches`` (default: all), and the static table with the first."""
    batches = batches if batches is not None else range(len(p.batches))
    for s in p.sources:
        folder = root / "inputs" / s.name
        folder.mkdir(parents=True, exist_ok=True)
        for b, batch in enumerate(p.batches):
            if b not in batches:
                continue
            for name, order, rows in p.files(b, s, batch.get(s.name, [])):
                path = folder / name
                write_file(path, s.ddl(), [input_row(r, s) for r in rows], s.fmt)
                os.utime(path, (BASE_MTIME + order, BASE_MTIME + order))
                if p.clean_source:  # Spark moves the files it read: the truth reads this copy
                    (root / WRITTEN / s.name).mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, root / WRITTEN / s.name / name)
    if p.static and batches.start == 0:
        st = p.static
        folder = root / "inputs" / st.name
        folder.mkdir(parents=True)
        ddl = f"{st.lookup} STRING, {st.produces} STRING"
        write_file(folder / f"part-00000.{st.fmt}", ddl, st.rows, st.fmt)


def conf(p: Pipeline, event_log: Path) -> dict[str, str]:
    c = {
        "spark.sql.shuffle.partitions": str(p.partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
        "spark.sql.streaming.stateStore.providerClass": HDFS if p.provider == "hdfs" else ROCKSDB,
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_log.as_uri(),
        "spark.eventLog.compress": "true" if p.seed % 2 else "false",
        "spark.eventLog.compression.codec": "zstd",
    }
    if p.watermark_policy != "min":
        c["spark.sql.streaming.multipleWatermarkPolicy"] = p.watermark_policy
    if p.provider == "rocksdb_changelog":
        c["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] = "true"
        c["spark.sql.streaming.stateStore.minDeltasForSnapshot"] = "4"
    return c


def run_in_process(p: Pipeline, dest: Path) -> None:
    """Writes the inputs, runs the query to the end of its input (and the batch without data after
    it), keeps everything in ``dest`` (replaced). With ``restart_after``: two Spark applications, the
    first over the files of the batches before it, the second, on the same checkpoint, after the rest
    were written (a job stopped and restarted)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "event_log").mkdir()
    n = len(p.batches)
    runs = [range(0, p.restart_after), range(p.restart_after, n)] if p.restart_after else [range(n)]
    progress: list[dict[str, Any]] = []
    for part in runs:
        write_inputs(p, dest, part)
        code, done = _run_once(p, dest)
        progress += done
    if p.restart_after:
        code.append(f"# run twice: stopped after the files of batches 0-{p.restart_after - 1}, restarted with the rest")
    (dest / "progress.json").write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")
    (dest / "pipeline.json").write_text(p.to_json())
    (dest / "query.txt").write_text("\n".join(code) + "\n")


def _run_once(p: Pipeline, dest: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """One Spark application running the query to the end of the input there is: its code and progress."""
    from pyspark.sql import SparkSession

    from pipegen.build import streaming_query

    builder = SparkSession.builder.master("local[2]").appName(f"pipegen-{p.name}")
    for k, v in conf(p, dest / "event_log").items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        q = streaming_query(spark, p, dest)
        writer = q.df.writeStream.outputMode(p.output).option("checkpointLocation", str(dest / "checkpoint"))
        if p.sink_kind == "foreach":
            writer = writer.foreachBatch(_batch_writer(p.sink_fmt, dest / "sink"))
            q.code.append(
                f"def write(df, batch_id): df.write.mode('append').{p.sink_fmt}(f'sink/batch={{batch_id}}')"
                + ("  # with header" if p.sink_fmt == "csv" else "")
            )
            q.code.append(
                f"df.writeStream.outputMode({p.output!r}).foreachBatch(write)"
                ".option('checkpointLocation', 'checkpoint').trigger(availableNow=True).start()"
            )
        else:
            writer = writer.format(p.sink_fmt).option("path", str(dest / "sink"))
            if p.sink_fmt == "csv":
                writer = writer.option("header", "true")
            q.code.append(
                f"df.writeStream.outputMode({p.output!r}).format({p.sink_fmt!r}).option('path', 'sink')"
                ".option('checkpointLocation', 'checkpoint').trigger(availableNow=True).start()"
            )
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        if query.exception():
            raise RuntimeError(str(query.exception()))
        return q.text().splitlines(), [json.loads(x.json) for x in query.recentProgress]
    finally:
        spark.stop()


def _batch_writer(fmt: str, sink: Path) -> Any:
    """A foreachBatch function writing each batch's rows to ``sink/batch=<id>/`` in ``fmt``."""

    def write(df: Any, batch_id: int) -> None:
        w = df.write.mode("append")
        if fmt == "csv":
            w = w.option("header", "true")
        getattr(w, fmt)(str(sink / f"batch={batch_id}"))

    return write


def run(p: Pipeline, dest: Path, timeout: float = 600) -> None:
    """``run_in_process`` in a Python process of its own (a Spark application of its own)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(p.to_json())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    try:
        r = subprocess.run(
            [sys.executable, "-m", "pipegen", "run", f.name, str(dest)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        tail = [line for line in (r.stderr or "").splitlines() if line.strip()][-15:]
        raise RuntimeError(f"{p.name} did not run:\n" + "\n".join(tail))
