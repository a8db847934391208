"""Inside the user's job process: start the changed query on a scratch copy of its checkpoint, into
Spark's ``noop`` sink, for one batch, and write down what Spark said (``statelens preflight``); or
replay the checkpoint's batches with it into a new checkpoint (``statelens rebuild``, ``run_replay``).

Standard library and PySpark only (the job may run in an environment of its own). It is loaded
before the job's code (``boot/sitecustomize.py``), or called in-process by ``judge_writer`` (the
Python API), and patches PySpark's writers:

* ``DataStreamWriter.start`` / ``toTable`` (classic and Connect): a query whose checkpoint is the
  one judged runs on the scratch copy with ``format("noop")`` (a ``foreachBatch`` or ``foreach``
  function of the job's is dropped, never called), for the one batch it would run next (planned
  from the sources as on a real restart; without new data, the batch the copy is given): Spark
  plans it with every restart check and runs it, and the process ends there. Any other query is not started (an inert stand-in is returned);
* ``DataFrameWriter`` and ``DataFrameWriterV2`` writes (a table created, a file written before the
  stream starts): skipped, and named in the result.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from typing import Any

ENV_CHECKPOINT = "STATELENS_PREFLIGHT_CHECKPOINT"  # the checkpoint judged, as the user gave it
ENV_SCRATCH = "STATELENS_PREFLIGHT_SCRATCH"  # the scratch copy the query runs on
ENV_RESULT = "STATELENS_PREFLIGHT_RESULT"  # where the result (JSON) goes
ENV_CONFS = "STATELENS_PREFLIGHT_CONFS"  # JSON list: the SQL confs the checkpoint pins
ENV_PLANNED = "STATELENS_PREFLIGHT_PLANNED"  # JSON [relative path, text]: the next offsets without new data
ENV_REPLAY = "STATELENS_REBUILD_PLAN"  # rebuild: a JSON file, the replay's plan (``run_replay``)

_SKIPPED: list[str] = []  # writes of the job's that were not made
_OTHERS: list[str] = []  # queries of the job's on other checkpoints, not started


def same_location(a: str, b: str) -> bool:
    """Whether two checkpoint locations name the same folder (``file:`` or not, trailing slashes)."""

    def norm(p: str) -> str:
        p = p.strip()
        if p.startswith("file://"):
            p = p[len("file://") :]
        elif p.startswith("file:"):
            p = p[len("file:") :]
        if "://" not in p:
            p = os.path.realpath(os.path.expanduser(p))
        return p.rstrip("/")

    return norm(a) == norm(b)


_WRAPPERS = ("STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR")  # classes around the failure's own


def _error_class(e: BaseException) -> str | None:
    """Spark's error class of a failure: the cause's, which a failed query's ``STREAM_FAILED`` holds in
    its message (``getCondition()`` names only the wrapper)."""
    import re

    found = None
    for name in ("getCondition", "getErrorClass"):
        fn = getattr(e, name, None)
        if callable(fn):
            try:
                value = fn()
            except Exception:
                value = None
            if value:
                found = str(value)
                break
    if found is None or found in _WRAPPERS:
        inner = [c for c in re.findall(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", str(e)) if c not in _WRAPPERS]
        return inner[0] if inner else found
    return found


def _explicit_confs(spark: Any, keys: list[str], unread: list[str]) -> dict[str, str]:
    """The confs among ``keys`` the job set itself (a default is not a choice of the job's); a conf
    that cannot be read goes to ``unread`` with why."""
    out: dict[str, str] = {}
    try:
        jconf = spark._jsparkSession.sessionState().conf()  # classic
    except Exception:  # Spark Connect: no JVM session here
        jconf = None
    for k in keys:
        try:
            if jconf is not None:
                if jconf.contains(k):
                    out[k] = str(jconf.getConfString(k))
            else:  # Connect: what the session answers (set, or the server's default)
                value = spark.conf.get(k, None)
                if value is not None:
                    out[k] = str(value)
        except Exception as e:
            unread.append(f"{k} ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
    return out


def _plan(query: Any) -> str | None:
    """The formatted physical plan of the batch the query ran (classic Spark; None otherwise)."""
    try:
        execution = query._jsq.streamingQuery().lastExecution()
        if execution is None:
            return None
        from pyspark import SparkContext

        mode = SparkContext._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")  # type: ignore[union-attr]
        return str(execution.explainString(mode))
    except Exception:
        return None


def _write(result: dict[str, Any]) -> None:
    path = os.environ.get(ENV_RESULT)
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def _redirect(writer: Any, scratch: str, connect: bool) -> None:
    """Point the writer at the scratch copy and Spark's ``noop`` sink."""
    if connect:
        proto = writer._write_proto
        proto.options["checkpointLocation"] = scratch
        proto.format = "noop"
        for name in ("foreach_batch", "foreach_writer", "path", "table_name"):
            with contextlib.suppress(ValueError):  # a field this PySpark's proto does not have
                proto.ClearField(name)
    else:
        writer.option("checkpointLocation", scratch)
        writer.format("noop")  # also replaces a foreachBatch / foreach sink: Spark starts the noop sink


def _one_batch(writer: Any, connect: bool) -> dict[str, Any]:
    """Start the query, let its first batch end (or the query, when it has none to run), stop it."""
    error: str | None = None
    error_class: str | None = None
    try:
        query = _ORIGINAL_START.get(type(writer), type(writer).start)(writer)
    except Exception as e:  # refused before it ran (an output mode the query does not allow ...)
        return {"error": str(e), "error_class": _error_class(e), "started": False, "plan": None, "progress": []}
    # a batch reports progress only when it ended well: once there is some, the restart has passed, and
    # what the stop raises (a next batch, e.g. the watermark's batch without data, interrupted on a busy
    # machine) is not the restart's verdict
    passed = False
    try:
        while not query.awaitTermination(0.2):
            if query.recentProgress:
                passed = True
                query.stop()
        failure = query.exception()
        if failure is not None and not passed:
            error, error_class = str(failure), _error_class(failure)
    except BaseException as e:  # the verdict is Spark's exception itself
        if not passed:
            error, error_class = str(e), _error_class(e)
    progress: list[dict[str, Any]] = []
    with contextlib.suppress(Exception):
        progress = [{"batchId": p["batchId"], "numInputRows": p["numInputRows"]} for p in query.recentProgress]
    return {
        "error": error,
        "error_class": error_class,
        "started": True,
        "plan": None if connect else _plan(query),
        "progress": progress,
    }


# optimizer rules that fold a batch without new data into empty local relations, its filters with them:
# left out for that batch, its plan shows the query's filters as a batch with data would
_FOLDING = (
    "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation",
    "org.apache.spark.sql.catalyst.optimizer.PropagateEmptyRelation",
)
_EXCLUDED = "spark.sql.optimizer.excludedRules"


@contextlib.contextmanager
def _keeping_filters(spark: Any) -> Any:
    before = None
    with contextlib.suppress(Exception):
        before = spark.conf.get(_EXCLUDED, None)
    try:
        with contextlib.suppress(Exception):
            spark.conf.set(_EXCLUDED, ",".join([x for x in [before] if x] + list(_FOLDING)))
        yield
    finally:
        with contextlib.suppress(Exception):
            spark.conf.set(_EXCLUDED, before) if before else spark.conf.unset(_EXCLUDED)


def run_redirected(writer: Any, spark: Any, scratch: str, connect: bool, planned: tuple[str, str] | None) -> dict[str, Any]:
    """Run the writer's query on ``scratch`` into ``noop`` for the batch it would run next: Spark's
    verdict, the plan it made and the confs the job set. The batch is planned from the sources, as
    on a real restart; when they hold no new data (no batch ran), ``planned`` (a relative path in the
    copy and its text: the next offsets without new data) is written and that batch is run."""
    confs = json.loads(os.environ.get(ENV_CONFS, "[]") or "[]")
    _redirect(writer, scratch, connect)
    started = time.time()
    writer.trigger(availableNow=True)
    result = _one_batch(writer, connect)
    result["new_data"] = True
    planned_path = os.path.join(scratch, planned[0]) if planned else None
    if result["started"] and not result["error"] and planned_path and not os.path.exists(planned_path):
        # Spark planned no batch (an idle progress report is no batch): run the next one without new data
        with open(planned_path, "w", encoding="utf-8") as f:
            f.write(planned[1])  # type: ignore[index]
        writer.trigger(once=True)
        with _keeping_filters(spark):
            result = _one_batch(writer, connect)
        result["new_data"] = False
    import pyspark

    unread: list[str] = []
    return result | {
        "confs": _explicit_confs(spark, confs, unread),
        "confs_unread": unread,
        "spark_version": getattr(spark, "version", None) or pyspark.__version__,
        "connect": connect,
        "seconds": round(time.time() - started, 3),
        "skipped_writes": list(_SKIPPED),
        "other_queries": list(_OTHERS),
    }


def _copy(old: str, new: str, rel: str) -> None:
    """One file of the old checkpoint's logs into the new one, byte for byte (local folders)."""
    import shutil

    dest = os.path.join(new, rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copyfile(os.path.join(old, rel), dest)


def sink_of(writer: Any, path: Any = None, format: Any = None) -> dict[str, Any]:
    """The job's sink as its writer sets it (before the query is pointed at noop)."""
    opts = _options(writer)
    return {"path": path or opts.get("path"), "format": format or opts.get("format"), "table": opts.get("__table")}


def run_replay(
    writer: Any, spark: Any, connect: bool, plan: dict[str, Any], ask: Any, sink: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Replay the old checkpoint's batches with the changed query into a new checkpoint, into ``noop``.

    ``plan``: ``from`` and ``to`` (the two checkpoints), ``first`` (the files every batch needs: the
    query's id, the file sources' logs), ``batches`` ([{"batch", "files"}]: each batch's offsets),
    ``pending`` (an uncommitted last batch's offsets: copied, not run; the job re-runs it).
    Each batch's offsets, as Spark wrote them in the old checkpoint, are put into the new one, and
    the query started with a one-batch trigger: Spark re-runs a batch whose offsets are logged
    without a commit, with those offsets (the same input) and their watermark, and writes its state
    and its commit. ``ask(message)`` tells the caller each batch's end (the first with the plan
    Spark made) and returns what to do: ``{"stop": why}`` ends the replay; at the end, ``{"kind":
    "check"}`` returns a scratch copy of the new checkpoint to judge a restart on. ``sink``: the job's
    sink, told with the first batch."""
    old, new = plan["from"], plan["to"]
    for rel in plan["first"]:
        _copy(old, new, rel)
    _redirect(writer, new, connect)
    start = _ORIGINAL_START.get(type(writer), type(writer).start)
    replayed: list[dict[str, Any]] = []
    began = time.time()
    for i, step in enumerate(plan["batches"]):
        for rel in step["files"]:
            _copy(old, new, rel)
        writer.trigger(once=True)
        t = time.time()
        try:
            query = start(writer)
            query.awaitTermination()
            failure = query.exception()
        except Exception as e:
            failure = e
        if failure is not None:
            return {"error": str(failure), "error_class": _error_class(failure), "batch": step["batch"], "replayed": replayed}
        last = query.lastProgress or {}
        done = {
            "batch": step["batch"],
            "ran": last.get("batchId"),
            "input_rows": int(last.get("numInputRows") or 0),
            "seconds": round(time.time() - t, 3),
        }
        replayed.append(done)
        sources = [str(x.get("description", "")) for x in last.get("sources") or []]
        first = {"plan": None if connect else _plan(query), "sources": sources, "sink": sink} if i == 0 else {}
        said = ask({"kind": "batch", "index": i, "of": len(plan["batches"]), **done, **first})
        if said.get("stop"):
            return {"stopped": said["stop"], "replayed": replayed}
    for rel in plan.get("pending", []):
        _copy(old, new, rel)
    seconds = round(time.time() - began, 3)
    said = ask({"kind": "check"})
    check = run_redirected(writer, spark, said["scratch"], connect, tuple(said["planned"]) if said.get("planned") else None)
    return {"replayed": replayed, "seconds": seconds, "check": check}


def _asking(folder: str) -> Any:
    """``ask`` across processes: a question is ``ask-<n>.json`` in ``folder``, its answer ``answer-<n>.json``."""
    count = [0]
    parent = os.getppid()  # State Lens, which answers

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        count[0] += 1
        n = count[0]
        tmp = os.path.join(folder, f".ask-{n}.json")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(message, f)
        os.replace(tmp, os.path.join(folder, f"ask-{n}.json"))
        answer = os.path.join(folder, f"answer-{n}.json")
        while not os.path.exists(answer):
            if os.getppid() != parent:  # State Lens is gone: nobody will answer
                raise SystemExit("statelens rebuild ended: the replay stops")
            time.sleep(0.05)
        with open(answer, encoding="utf-8") as f:
            return json.load(f)  # type: ignore[no-any-return]

    return ask


class _NotStarted:
    """What a query on another checkpoint gets instead of starting: nothing waits on it."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.id = self.runId = None
        self.isActive = False
        self.lastProgress = None
        self.recentProgress: list[Any] = []
        self.status = {"message": "not started by statelens preflight", "isDataAvailable": False, "isTriggerActive": False}

    def awaitTermination(self, timeout: Any = None) -> bool:
        return True

    def processAllAvailable(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def exception(self) -> None:
        return None

    def explain(self, extended: bool = False) -> None:
        return None


_ORIGINAL_START: dict[type, Any] = {}


def _options(writer: Any) -> dict[str, str]:
    found = getattr(writer, "_statelens_options", None)
    if found is None:
        found = {}
        with contextlib.suppress(Exception):
            writer._statelens_options = found
    return found  # type: ignore[no-any-return]


def _checkpoint_of(writer: Any, spark: Any, options: dict[str, str], query_name: str | None) -> str | None:
    connect = hasattr(writer, "_write_proto")
    if connect:
        given = dict(writer._write_proto.options)
        for k, v in given.items():
            options.setdefault(k.lower(), v)
    found = options.get("checkpointlocation")
    if found:
        return found
    root = None
    try:
        root = spark.conf.get("spark.sql.streaming.checkpointLocation", None)
    except Exception:
        root = None
    name = query_name or options.get("queryname")
    if root and name:
        return root.rstrip("/") + "/" + name
    return None


def _finish(result: dict[str, Any], spark: Any) -> None:
    _write(result)
    with contextlib.suppress(Exception):
        spark.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _patched_start(cls: type) -> Any:
    original = cls.start  # type: ignore[attr-defined]
    _ORIGINAL_START[cls] = lambda w: original(w)

    def start(
        self: Any,
        path: Any = None,
        format: Any = None,
        outputMode: Any = None,
        partitionBy: Any = None,
        queryName: Any = None,
        **options: Any,
    ) -> Any:
        opts = _options(self)
        for k, v in options.items():
            if v is not None:
                opts[k.lower()] = str(v)
        if outputMode is not None:
            self.outputMode(outputMode)
        if queryName is not None:
            self.queryName(queryName)
            opts["queryname"] = queryName
        spark = self._spark if hasattr(self, "_spark") else self._session
        checkpoint = _checkpoint_of(self, spark, opts, queryName)
        target = os.environ.get(ENV_CHECKPOINT, "")
        if not checkpoint or not target or not same_location(checkpoint, target):
            _OTHERS.append(f"{queryName or opts.get('queryname') or 'a query'} on {checkpoint or 'no checkpoint'}")
            return _NotStarted(queryName)
        # the job's sink as the job set it (before the query is pointed at noop), and what it would write
        sink = sink_of(self, path, format)
        output: dict[str, Any] = {"sink": sink}
        with contextlib.suppress(Exception):  # classic PySpark: the rows the changed query writes
            output["output_schema"] = json.loads(self._df.schema.json())
        if os.environ.get(ENV_REPLAY):
            with open(os.environ[ENV_REPLAY], encoding="utf-8") as f:
                replay = json.load(f)
            result = run_replay(self, spark, hasattr(self, "_write_proto"), replay, _asking(replay["exchange"]), sink)
            if "check" in result:
                result["check"] |= output
        else:
            planned = json.loads(os.environ.get(ENV_PLANNED) or "null")
            result = run_redirected(
                self, spark, os.environ[ENV_SCRATCH], hasattr(self, "_write_proto"), tuple(planned) if planned else None
            )
            result |= output
        result["checkpoint"] = checkpoint
        _finish(result, spark)
        return None  # not reached

    def to_table(
        self: Any,
        tableName: str,
        format: Any = None,
        outputMode: Any = None,
        partitionBy: Any = None,
        queryName: Any = None,
        **options: Any,
    ) -> Any:
        _options(self)["__table"] = tableName
        return start(self, None, format, outputMode, partitionBy, queryName, **options)

    def option(self: Any, key: str, value: Any) -> Any:
        _options(self)[key.lower()] = str(value)
        return option.original(self, key, value)  # type: ignore[attr-defined]

    def options(self: Any, **kw: Any) -> Any:
        for k, v in kw.items():
            _options(self)[k.lower()] = str(v)
        return options.original(self, **kw)  # type: ignore[attr-defined]

    def fmt(self: Any, source: str) -> Any:
        _options(self)["format"] = source
        return fmt.original(self, source)  # type: ignore[attr-defined]

    option.original = cls.option  # type: ignore[attr-defined]
    options.original = cls.options  # type: ignore[attr-defined]
    fmt.original = cls.format  # type: ignore[attr-defined]
    cls.start = start  # type: ignore[attr-defined]
    cls.toTable = to_table  # type: ignore[attr-defined]
    cls.option = option  # type: ignore[attr-defined]
    cls.options = options  # type: ignore[attr-defined]
    cls.format = fmt  # type: ignore[attr-defined]
    return start


_BATCH_WRITES = ("save", "saveAsTable", "insertInto", "parquet", "json", "csv", "orc", "text", "xml", "jdbc")
_V2_WRITES = ("append", "overwrite", "overwritePartitions", "create", "replace", "createOrReplace")


def _skip(cls: type, names: tuple[str, ...], what: str) -> None:
    for name in names:
        if not hasattr(cls, name):
            continue

        def skipped(self: Any, *args: Any, _name: str = name, **kw: Any) -> None:
            target = next((str(a) for a in args if isinstance(a, str)), kw.get("path") or kw.get("name") or "")
            _SKIPPED.append(f"{what}.{_name}({target})")

        setattr(cls, name, skipped)


def _no_query() -> None:
    """At exit without a verdict: what the job did start and write instead."""
    path = os.environ.get(ENV_RESULT)
    if path and not os.path.exists(path):
        _write({"no_query": True, "skipped_writes": list(_SKIPPED), "other_queries": list(_OTHERS)})


def _no_event_log() -> None:
    """The job's scratch run writes no event log where its settings point (the team's folder, under
    the same query id: its batches would read as the checkpoint's): a classic session is built with
    ``spark.eventLog.enabled`` off, whatever the job or its defaults say."""
    from pyspark.sql import SparkSession

    build = SparkSession.Builder.getOrCreate

    def get_or_create(self: Any) -> Any:
        opts = getattr(self, "_options", {})
        connect = (
            "spark.remote" in opts
            or "SPARK_REMOTE" in os.environ
            or str(opts.get("spark.api.mode", os.environ.get("SPARK_API_MODE", ""))).lower() == "connect"
        )
        if not connect:  # a Connect server's event log is the server's, not the job's
            self.config("spark.eventLog.enabled", "false")
        return build(self)

    SparkSession.Builder.getOrCreate = get_or_create  # type: ignore[method-assign]


def _patch(package: str) -> None:
    """Patch the writers of ``pyspark.sql`` (classic) or ``pyspark.sql.connect``."""
    readwriter = importlib.import_module(f"{package}.readwriter")
    _patched_start(importlib.import_module(f"{package}.streaming.readwriter").DataStreamWriter)
    _skip(readwriter.DataFrameWriter, _BATCH_WRITES, "DataFrameWriter")
    _skip(readwriter.DataFrameWriterV2, _V2_WRITES, "DataFrameWriterV2")


def install() -> None:
    """Patch PySpark's writers (the ones this PySpark has: Connect's need its extra packages)."""
    import atexit

    atexit.register(_no_query)
    _no_event_log()
    for package in ("pyspark.sql", "pyspark.sql.connect"):
        try:
            _patch(package)
        except ImportError:
            return
