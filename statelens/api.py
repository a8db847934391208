"""The API: a checkpoint and the questions the CLI asks of it, as methods.

Each method is the CLI command of the same name (its keyword arguments are the command's flags)
and calls the same gatherer; the CLI prints what these return. Every call is one question: each
remote folder is listed once in it and listed again by the next (a running query adds files).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from statelens import results
from statelens.analysis.core.errors import InvalidInput, StateLensError, option

R = TypeVar("R")


@contextlib.contextmanager
def question() -> Iterator[None]:
    """The block is one question (a CLI command): each remote folder is listed once in it, whichever
    methods it calls."""
    from statelens.spark_io.storage import question as asked

    with asked():
        yield


def _question(method: Callable[..., R]) -> Callable[..., R]:
    @functools.wraps(method)
    def asked(*args: Any, **kwargs: Any) -> R:
        from statelens.spark_io.storage import question

        with question():
            return method(*args, **kwargs)

    return asked


def configure(
    engine: str | None = None,
    master: str | None = None,
    remote: str | None = None,
    spark: Any = None,
    single_question: bool = False,
    served: bool = False,
) -> None:
    """Who reads the state and where Spark runs, for this process (the CLI's --engine, --master,
    --remote). ``engine``: ``auto`` (default: native where it reads, else Spark), ``native`` or
    ``spark``. ``spark``: a SparkSession the notebook has already (Databricks' ``spark``): reads
    that need Spark go through it instead of starting one. ``single_question``: this process asks
    one question and ends (reads are not kept for a next one). ``served``: with neither ``master``
    nor ``remote`` nor ``SPARK_REMOTE``, Spark is the warm engine ``serve()`` started, if one runs."""
    from statelens.spark_io.readers import engine as engines
    from statelens.spark_io.runtime import session

    if master and remote:
        raise InvalidInput(f"Give either {option('--master')} or {option('--remote')}, not both.")
    if engine:
        engines.configure(engine)
    if single_question:
        engines.one_question_per_process()
    if spark is not None:
        session.adopt(spark)
    elif master or remote:
        session.configure(master=master, remote=remote)
    elif served and not os.environ.get("SPARK_REMOTE"):
        url = serving()
        if url:
            session.configure(remote=url, served=True)


def audit_refusals(door: str, command: str) -> None:
    """Under a team's access policy with an audit log (``STATELENS_POLICY``), each refusal this process
    makes (a path outside the allowed roots, a link leading out of them) is a line of that log, with
    the operating system's user: the CLI's ``command`` is audited as the app's pages are."""
    import getpass

    from statelens.spark_io.runtime.policy import audit, load_policy
    from statelens.spark_io.storage.gate import noting

    policy = load_policy()
    if policy is None or not policy.audit_log:
        return
    user, seen = getpass.getuser(), set()

    def noted(line: str) -> None:
        if line not in seen:
            seen.add(line)
            audit(policy, {"event": "refused", "user": user, "door": door, "command": command, "reason": line})

    noting(noted)


def refused(error: StateLensError) -> None:
    """A refusal this process answers with (a statement the SQL gateway does not run ...), noted where
    refusals are audited (``audit_refusals``; the gate notes its own)."""
    from statelens.spark_io.storage.gate import note

    if error.refusal:
        note(error.message)


def serve() -> tuple[str, bool]:
    """Start a local Spark Connect server once (``statelens serve``): later processes that need Spark
    use it instead of starting a JVM. Its URL, and whether this call started it."""
    from statelens.spark_io.runtime import serve as served

    return served.start()


def serving() -> str | None:
    """The URL of the warm engine ``serve()`` started, or None."""
    from statelens.spark_io.runtime import serve as served

    return served.running()


def shown_url(url: str) -> str:
    """A Spark Connect URL without its token, to print."""
    from statelens.spark_io.runtime import serve as served

    return served.shown(url)


def stop_serving() -> bool:
    """Stop the warm engine; whether one was running."""
    from statelens.spark_io.runtime import serve as served

    return served.stop()


@contextlib.contextmanager
def downloads(report: Callable[[int, int, int], None]) -> Iterator[None]:
    """Inside the block, downloads from object storage that take over a second call
    ``report(bytes_done, bytes_total, files)`` as they go."""
    from statelens.spark_io.storage import downloads as storage_downloads

    with storage_downloads.reporting(report):
        yield


def limits() -> dict[str, float]:
    """The SQL gateway's defaults: ``row_budget`` (most rows a table loads), ``timeout`` (seconds)."""
    from statelens.spark_io.gather.limits import DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT

    return {"row_budget": DEFAULT_ROW_BUDGET, "timeout": DEFAULT_TIMEOUT}


@_question
def ls(prefix: str, sort: str = "problems") -> results.Listing:
    """Every checkpoint under a local folder or an object-storage prefix, one row each (no JVM)."""
    from statelens.analysis.runs.fleet import sort_rows
    from statelens.spark_io.gather.fleet import list_checkpoints
    from statelens.spark_io.storage.gate import skipped_links

    with skipped_links() as skipped:
        rows = list_checkpoints(prefix)
    return results.Listing(prefix, sort_rows(rows, sort), skipped)


def open(path: str, keep: bool = False) -> Checkpoint:
    """A checkpoint (the folder given to the query as ``checkpointLocation``): local, ``s3://``,
    ``abfss://``, ``gs://`` or ``hdfs://``. It is read when asked, never written. ``keep``: keep what
    was read for the questions after (the app holds one such object per committed batch); without
    it each method reads afresh (a running query commits new batches)."""
    cp = Checkpoint(path, keep=keep)
    cp._files()  # a path that is not a checkpoint fails here, with the CLI's message (a damaged one does not)
    return cp


class _Kept:
    """What a kept checkpoint read, for the questions after: the newest ``size`` values per kind."""

    def __init__(self) -> None:
        self._values: dict[str, collections.OrderedDict[Any, Any]] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, key: Any, make: Callable[[], R], size: int = 16) -> R:
        with self._lock:
            kept = self._values.setdefault(kind, collections.OrderedDict())
            if key in kept:
                kept.move_to_end(key)
                return cast(R, kept[key])
        value = make()  # outside the lock: two questions read at once
        self.put(kind, key, value, size)
        return value

    def peek(self, kind: str, key: Any) -> Any:
        """What was kept under ``key``, or None."""
        with self._lock:
            return self._values.get(kind, {}).get(key)

    def put(self, kind: str, key: Any, value: Any, size: int = 16) -> None:
        with self._lock:
            kept = self._values.setdefault(kind, collections.OrderedDict())
            kept[key] = value
            kept.move_to_end(key)
            while len(kept) > size:
                kept.popitem(last=False)


class Checkpoint:
    """One checkpoint. Each method reads it afresh (a running query commits new batches) unless it
    was opened with ``keep``; SQL keeps the tables it loaded per batch."""

    def __init__(self, path: str, keep: bool = False) -> None:
        self.path = path
        self.keep = keep
        self._kept = _Kept()
        self._workspaces: dict[tuple[Any, ...], Any] = {}

    def _once(self, kind: str, key: Any, make: Callable[[], R], size: int = 16) -> R:
        """``make()``, kept for the questions after when the checkpoint is kept."""
        return self._kept.get(kind, key, make, size) if self.keep else make()

    def __repr__(self) -> str:
        return f"statelens.open({self.path!r})"

    @_question
    def _files(self) -> Any:
        """The checkpoint's folders and files (``spark_io.logs.files.Files``), listed, not read."""
        from statelens.spark_io.logs.files import open_files

        return open_files(self.path)

    def fingerprint(self) -> tuple[int, int]:
        """Changes when the checkpoint starts or commits a batch (a listing of offsets/ and commits/)."""
        from statelens.spark_io.logs.files import fingerprint

        return fingerprint(self.path)

    @_question
    def info(self) -> Any:
        """The checkpoint's logs and metadata (``analysis.core.model.CheckpointInfo``), no JVM."""
        from statelens.spark_io.logs.checkpoint import read_checkpoint

        return self._once("info", None, lambda: read_checkpoint(self.path))

    def _progress_log(self, event_log: str | None) -> Any:
        """The query's progress and plans from ``event_log`` (``analysis.runs.progress.ProgressLog``), or None."""
        if not event_log:
            return None
        from statelens.spark_io.logs.event_logs import log_fingerprint, read_progress

        key = (event_log, log_fingerprint(event_log) if self.keep else None)  # a running application's log grows
        return self._once("progress", key, lambda: read_progress(event_log, self.info()), 8)

    @_question
    def key_schemas(self) -> tuple[dict[int, list[dict[str, Any]]], dict[int, str]]:
        """Each operator's key fields from the state schema files (no JVM), and why any could not be read."""
        from statelens.spark_io.logs.checkpoint import read_key_fields

        return self._once("key_schemas", None, lambda: read_key_fields(self.path))

    @_question
    def state_files(self) -> results.StateFiles:
        """Every file under state/ (store, partition, version, kind, bytes), no JVM."""
        from statelens.spark_io.logs.checkpoint import list_state_files

        return results.StateFiles(self.info(), list_state_files(self.path))

    @_question
    def explain_error(self, error: str) -> Any:
        """A failed restart's error text (``query.exception()``, a driver log's lines), explained
        against this checkpoint (``analysis.checkpoint.doctor.RestartExplanation``)."""
        from statelens.spark_io.logs.checkpoint import explain_restart_error

        return explain_restart_error(self.path, error)

    @_question
    def overview(self) -> results.Overview:
        """Query id, batches and watermarks, operators and stores (no JVM)."""
        return results.Overview(self.info())

    @_question
    def doctor(self, event_log: str | None = None, error: str | None = None) -> results.Doctor:
        """Is the checkpoint whole; where a restart starts, what it reads, what it may change.
        ``event_log``: whether the query's last run still runs (or a repartition's duration);
        ``error``: a failed restart's error text or event log, explained."""
        from statelens.spark_io.logs.checkpoint import doctor, read_checkpoint

        run, runs = None, None
        if event_log:
            from statelens.spark_io.logs.event_logs import read_progress, repartition_runs

            runs = repartition_runs(event_log)  # an application that repartitioned the state offline
            try:
                run = read_progress(event_log, read_checkpoint(self.path)).run
            except StateLensError:
                if not runs:  # neither the query's run nor a repartition: the log is not this checkpoint's
                    raise
        explained = None
        if error:
            from statelens.analysis.checkpoint.doctor import RunState
            from statelens.spark_io.logs.checkpoint import explain_restart_error
            from statelens.spark_io.logs.event_logs import read_error_source

            try:
                text = read_error_source(error)
            except StateLensError as e:
                raise InvalidInput(f"{option('--error')}: {e.message}") from e
            explained = explain_restart_error(self.path, text)
            if run is None:  # the run that raised it has ended: its uncommitted batch is not running
                run = RunState(False, explained.title, error)
        return results.Doctor(doctor(self.path, run, repartition_runs=runs), explained)

    @_question
    def progress(self, event_log: str | None = None) -> results.Progress:
        """Per batch: what each source read (from the checkpoint), and with ``event_log`` rows,
        durations and the rows each operator dropped as late."""
        from statelens.analysis.runs.progress import batch_rows, operator_mismatch, snapshot_lags
        from statelens.spark_io.logs.checkpoint import read_source_offsets

        info = self.info()
        log = self._progress_log(event_log)
        rows = batch_rows(info, self._once("sources", None, lambda: read_source_offsets(self.path)), log)
        mismatch = operator_mismatch(log, info) if log else None
        return results.Progress(info, log, rows, log.notes if log else [], snapshot_lags(log) if log else [], mismatch)

    @_question
    def why_missing(
        self,
        *keys: str,
        operator: int | None = None,
        batch: int | None = None,
        key_field: str | None = None,
        join_type: str | None = None,
        event_time: str | int | None = None,
        event_log: str | None = None,
        input_root: str | None = None,
        sink: str | None = None,
        near_misses: bool = True,
    ) -> results.Answers:
        """Why each key never reached the output: by default the whole query (each input record of
        the key followed through every operator), or one ``operator``'s verdict. One answer per key."""
        from statelens.analysis.core.question import KeyQuestion
        from statelens.analysis.runs.progress import parse_event_time

        if not keys:
            raise InvalidInput("Give the keys to explain: cp.why_missing('ord-42', ...).")
        q = KeyQuestion(
            tuple(str(k) for k in keys),
            key_field,
            event_log,
            input_root,
            sink,
            operator,
            batch,
            join_type,
            parse_event_time(str(event_time)) if event_time is not None else None,
            near_misses,
        )
        return self.ask(q)

    @_question
    def ask(self, q: Any) -> results.Answers:
        """Why-missing's question as one value (``statelens.KeyQuestion``: the keys and how they are asked),
        what ``why_missing`` asks: ``cp.ask(statelens.KeyQuestion(("ord-42",), event_log=...))``.
        Kept: the state read stays for the keys asked after, and the input files searched for a
        key's verdicts are not searched again for its look-alikes."""
        from statelens.spark_io.gather.diagnosis import why_missing

        info, access = self.info(), self._access(q.operator, q.batch)
        searched = self._kept.peek("searched", q.but(near_misses=False)) if q.whole_query and q.near_misses else None
        report = why_missing(self.path, q, info, access, self._progress_log(q.event_log), searched)
        if self.keep and access is not None:
            from statelens.spark_io.readers.access import between_questions

            if q.whole_query and not q.near_misses:
                from statelens.analysis.fate.answer import QueryAnswer

                assert isinstance(report, QueryAnswer)
                self._kept.put("searched", q, report.input_search, 64)
            between_questions(access)
        return results.QueryAnswers(report) if q.whole_query else results.Answers(report)

    def _access(self, operator: int | None, batch: int | None = None) -> Any:
        """The state a kept checkpoint's questions read: every operator's (``operator`` None: the whole
        query), or one operator's at ``batch``, loaded for the keys after; None: read afresh."""
        if not self.keep:
            return None
        from statelens.analysis.core.model import resolve_batch
        from statelens.spark_io.readers.access import load_state, state_access

        info = self.info()
        if operator is None:
            return self._once("access", None, lambda: state_access(info), 4)
        at = resolve_batch(info, batch)
        return self._once("access", (operator, at), lambda: load_state(info, operator, at), 4)

    @_question
    def key_fields(self, operator: int) -> dict[str, str]:
        """An operator's key fields and how each reads (a join's ``field0 (order_id)``), the default one
        first. Kept and read natively: through the state its questions will read (a join's columns);
        through Spark the fields only (a job per side before any question)."""
        from statelens.spark_io.gather.diagnosis import key_field_labels
        from statelens.spark_io.readers.engine import wants_native

        info = self.info()
        if not (self.keep and wants_native(info)) or info.last_committed is None:
            return key_field_labels(info, operator, columns=False)
        return key_field_labels(info, operator, self._access(operator, info.last_committed))

    @_question
    def key_columns(self, event_log: str | None = None) -> list[str]:
        """The input columns a key may be in (every operator's key columns, operator 0's first)."""
        from statelens.spark_io.gather.fate import key_columns_of
        from statelens.spark_io.readers.access import state_access

        info = self.info()
        access = self._access(None) or state_access(info)
        return key_columns_of(info, access, self._progress_log(event_log))

    @_question
    def unmatched(
        self,
        operator: int | None = None,
        batch: int | None = None,
        since: int | None = None,
        join_type: str | None = None,
        event_log: str | None = None,
    ) -> results.Unmatched:
        """Which keys never matched: a join's keys evicted unmatched, waiting, or rejected by the
        condition; an aggregation's windows still waiting."""
        from statelens.spark_io.gather.unmatched import unmatched

        report = unmatched(self.path, operator, batch, since, info=self.info(), join_type=join_type, event_log=event_log)
        return results.Unmatched(report)

    @_question
    def skew(self, operator: int | None = None, store: str | None = None, batch: int | None = None) -> results.Skew:
        """Rows and bytes per partition of one store, skew ratios, hot keys."""
        from statelens.spark_io.gather.checkup import skew

        return results.Skew(skew(self.path, operator, store, batch))

    @_question
    def growth(self, operator: int | None = None, store: str | None = None) -> results.Growth:
        """Rows and bytes per batch from the change feed, with findings."""
        from statelens.spark_io.gather.checkup import growth

        return results.Growth(growth(self.path, operator, store))

    @_question
    def checkup(self, event_log: str | None = None) -> Any:
        """The whole health check (``spark_io.gather.checkup.Checkup``): skew and growth of every store,
        configuration, the doctor, and with ``event_log`` the rows dropped by the watermark."""
        from statelens.spark_io.gather.checkup import checkup

        return checkup(self.path, info=self.info(), event_log=event_log)

    @_question
    def chart(self, name: str, operator: int | None = None, store: str | None = None, batch: int | None = None) -> results.Chart:
        """One of the health charts with its data: ``watermark`` (per batch), ``skew`` (rows and bytes
        per partition of a store at ``batch``) or ``growth`` (rows and bytes per batch)."""
        from statelens.analysis.charts import charts

        if name == "watermark":
            info = self.info()
            return results.Chart(name, charts.watermark_table(info.batches), charts.watermark_figure(info.batches))
        if name == "skew":
            r = self.skew(operator, store, batch).report
            return results.Chart(name, charts.skew_table(r), charts.skew_figure(r))
        if name == "growth":
            g = self.growth(operator, store).report
            return results.Chart(name, charts.growth_table(g.stores), charts.growth_figure(g.stores))
        raise InvalidInput(f"Unknown chart '{name}': use watermark, skew or growth.")

    @_question
    def report(
        self,
        event_log: str | None = None,
        keys: list[str] | tuple[str, ...] = (),
        input_root: str | None = None,
        sink: str | None = None,
    ) -> results.Report:
        """The one-file HTML health report (``.html``): summary, findings, charts, and with ``keys``
        why each never reached the output, through the whole query."""
        c = self.checkup(event_log)
        answers = None
        if keys:
            from statelens.analysis.core.question import KeyQuestion
            from statelens.spark_io.gather.diagnosis import why_missing

            q = KeyQuestion(tuple(str(k) for k in keys), event_log=event_log, input_root=input_root, sink=sink)
            answers = why_missing(self.path, q, info=c.info).results
        return results.Report(c, answers)

    @_question
    def repartition(self, partitions: int, operator: int | None = None) -> results.Repartition:
        """What repartitioning the state to ``partitions`` would do (nothing is written)."""
        from statelens.spark_io.gather.repartition import repartition_preview

        return results.Repartition(repartition_preview(self.path, partitions, operator))

    @_question
    def preflight(
        self, command: list[str], event_log: str | None = None, timeout: float = 900, cwd: str | None = None
    ) -> results.Preflight:
        """Run the changed job (``["python", "job.py", ...]``, as deployed, in ``cwd``) against a scratch
        copy: does it restart on this checkpoint, by Spark's own checks, and what would behave otherwise."""
        from statelens.spark_io.preflight import preflight

        return results.Preflight(preflight(self.path, list(command), event_log=event_log, timeout=timeout, cwd=cwd))

    def rebuild(
        self,
        to: str,
        command: list[str] | None = None,
        build: Callable[[Any], Any] | None = None,
        spark: Any = None,
        event_log: str | None = None,
        accept_watermark_change: bool = False,
        progress: Callable[[int, int, int, int], None] | None = None,
        cwd: str | None = None,
        output_mode: str = "append",
        sink_to: str | None = None,
    ) -> results.Rebuild:
        """Rebuild the state for the changed job in the new checkpoint ``to``: this checkpoint's batches
        replayed with the changed query (the same input, offsets and watermarks; Spark writes the state
        and commits; the job's sink is not written), so that the changed job, pointed at ``to``,
        continues where the old one stopped. The changed job is ``command`` (``["python", "job.py",
        ...]``, run as deployed, in ``cwd``), or ``build(spark)`` (its ``DataStreamWriter`` or streaming
        DataFrame, replayed in this process's ``spark``). ``progress(n, of, batch, input_rows)`` is
        called after each batch. ``sink_to``: a new folder for the job's file sink, prepared so that it
        continues there (its ``_spark_metadata`` log holds an empty entry for every batch before)."""
        from statelens.spark_io.preflight.rebuild import rebuild, rebuild_writer

        if build is not None:
            from statelens.spark_io.runtime.session import get_spark

            return results.Rebuild(
                rebuild_writer(
                    self.path, to, build, spark or get_spark(), event_log, accept_watermark_change, progress, output_mode, sink_to
                )
            )
        return results.Rebuild(
            rebuild(self.path, to, list(command or []), event_log, accept_watermark_change, progress, cwd=cwd, sink_to=sink_to)
        )

    @_question
    def example_queries(self) -> dict[str, str]:
        """SQL to start from over this checkpoint's tables: title -> query."""
        from statelens.analysis.checkpoint.examples import example_queries

        return example_queries(self.info())

    def workspace(
        self,
        batch: int | None = None,
        row_budget: int | None = None,
        partitions: list[int] | None = None,
        spill: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """The DuckDB workspace at ``batch`` (default: the last committed one), kept for later queries
        with the same options (``sql``'s)."""
        from statelens.analysis.core.model import resolve_batch

        info = self.info()
        resolved = resolve_batch(info, batch) if info.operators else None
        options = (resolved, row_budget, tuple(partitions or ()), spill, timeout)
        ws = self._workspaces.get(options)
        if ws is None:
            ws = self._workspaces[options] = self.new_workspace(resolved, row_budget, partitions, spill, timeout)
        return ws

    def new_workspace(
        self,
        batch: int | None = None,
        row_budget: int | None = None,
        partitions: list[int] | tuple[int, ...] | None = None,
        spill: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """A DuckDB workspace of its own (``spark_io.gather.workspace.Workspace``: one connection, for
        one user); a kept checkpoint's tables are read once for every workspace."""
        from statelens.spark_io.gather.limits import DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT
        from statelens.spark_io.gather.workspace import Workspace, state_loader
        from statelens.spark_io.readers.state_reader import RowFilter
        from statelens.spark_io.runtime.scratch import session_dir

        spill_dir = session_dir("spill") if spill else None

        def kept_loader(info: Any, spec: Any, at: int, row_filter: Any, limit: Any, keys_only: bool) -> tuple[Any, str]:
            """The reads the other questions keep (the state browser's), shared with them."""
            if spec.changes:
                table, start, end = self.read_changes(spec.source, at, row_filter, limit)
                return table, f"{start}–{end}"
            table, b = self.read_state(spec.source, at, row_filter, limit, keys_only)
            return table, str(b)

        return Workspace(
            self.path,
            batch,
            loader=kept_loader if self.keep else state_loader,
            row_budget=DEFAULT_ROW_BUDGET if row_budget is None else row_budget,
            row_filter=RowFilter(partitions=tuple(partitions)) if partitions else None,
            spill_dir=spill_dir,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        )

    @_question
    def sql(
        self,
        query: str,
        batch: int | None = None,
        max_rows: int = 10_000,
        row_budget: int | None = None,
        partitions: list[int] | None = None,
        spill: bool = False,
        timeout: float | None = None,
    ) -> results.Rows:
        """DuckDB SQL over the state tables (``op0``, ``op0_left``, ``op0_changes`` ...) at ``batch``:
        ``.to_pandas()``, ``.to_arrow()``, ``.to_duckdb()``. ``row_budget``: most rows a table may
        load; ``partitions``: load only these; ``spill``: past the budget, query from Parquet on disk;
        ``timeout``: the query's time limit in seconds."""
        ws = self.workspace(batch, row_budget, partitions, spill, timeout)
        result = ws.execute(query, max_rows=max_rows)
        loaded = list(ws.loaded.values())
        notes = [f"{t.spec.name} was read by Spark: the native reader does not read {t.fallback}" for t in loaded if t.fallback]
        answer = results.Rows(
            result.table, f"SQL at batch {ws.batch}", {t.spec.name: t.engine for t in loaded}, result.truncated, notes
        )
        answer.batch = ws.batch
        return answer

    @_question
    def state(
        self, operator: int | None = None, store: str | None = None, batch: int | None = None, changes: bool = False
    ) -> results.Rows:
        """One store's rows at ``batch`` (default: the last committed one), or its change feed up to
        it: the operator's main store unless ``store`` names another (a join side, a variable)."""
        from statelens.analysis.core.model import default_operator, operator_of, resolve_batch
        from statelens.spark_io.gather.checkup import source_for
        from statelens.spark_io.readers import engine

        info = self.info()
        op = default_operator(info) if operator is None else operator_of(info, operator)
        source = source_for(op, store or op.default_store)
        b = resolve_batch(info, batch)
        if changes:
            table, start, end = engine.read_changes(self.path, source, end=b, info=info)
            at = f"change feed, batches {start}–{end}"
        else:
            table, read = engine.read_state(self.path, source, b, info=info)
            at = f"batch {read}"
        why = engine.fallback_of(table)
        notes = [f"read by Spark: the native reader does not read {why}"] if why else []
        return results.Rows(table, f"{source.describe()}, {at}", {source.describe(): engine.engine_of(table)}, notes=notes)

    @_question
    def read_state(
        self, source: Any, batch: int | None = None, row_filter: Any = None, limit: int | None = None, keys_only: bool = False
    ) -> tuple[Any, int]:
        """One view's rows (``analysis.core.model.StateSource``: a store, a join side, a state variable,
        timers) at ``batch`` as Arrow, and the batch read; ``row_filter`` (``statelens.RowFilter``):
        only these partitions or keys; ``keys_only``: a store's keys without decoding its values."""
        from statelens.spark_io.readers import engine

        info = self.info()
        key = (source, batch, row_filter, limit, keys_only)
        read = lambda: engine.read_state(self.path, source, batch, info, row_filter, limit, keys_only)  # noqa: E731
        return self._once("state", key, read)

    @_question
    def read_changes(
        self, source: Any, end: int, row_filter: Any = None, limit: int | None = None, start: int | None = None
    ) -> tuple[Any, int, int]:
        """One store's change feed up to ``end`` (from ``start``, else the oldest retained) as Arrow,
        and the batches it covers."""
        from statelens.spark_io.readers import engine

        info = self.info()
        key = (source, end, row_filter, limit, start)
        read = lambda: engine.read_changes(self.path, source, start, end, info, row_filter, limit)  # noqa: E731
        return self._once("changes", key, read)

    @_question
    def state_metadata(self) -> Any:
        """Spark's ``state-metadata`` table (Arrow): natively from the operator metadata files, else through Spark."""
        from statelens.spark_io.readers import engine

        return self._once("metadata", None, lambda: engine.read_state_metadata(self.path, self.info()))

    # Spark is the engine of record: each check reads again through Spark what the native reader
    # answered, and says whether they agree (``(same, detail)``)

    def check_state(self, source: Any, batch: int, table: Any) -> tuple[bool, str]:
        from statelens.spark_io.gather import crosscheck

        return crosscheck.check_state(self.info(), source, batch, table)

    def check_changes(self, source: Any, start: int, end: int, table: Any) -> tuple[bool, str]:
        from statelens.spark_io.gather import crosscheck

        return crosscheck.check_changes(self.info(), source, start, end, table)

    def check_state_metadata(self, table: Any) -> tuple[bool, str]:
        from statelens.spark_io.gather import crosscheck
        from statelens.spark_io.readers.state_reader import read_state_metadata

        return crosscheck.rows_agree(table, read_state_metadata(self.path))

    def check_skew(self, report: Any) -> tuple[bool, str]:
        from statelens.spark_io.gather import crosscheck

        return crosscheck.check_skew(self.info(), report)

    def check_answers(self, answers: results.Answers, q: Any) -> tuple[bool, str]:
        """Why-missing's answers to ``q`` asked again with Spark reading the state."""
        from statelens.spark_io.gather import crosscheck

        progress = self._progress_log(q.event_log)
        if q.whole_query:
            return crosscheck.check_why_missing_whole(self.info(), answers.report, q, progress)
        return crosscheck.check_why_missing(self.info(), answers.report, q, progress)
