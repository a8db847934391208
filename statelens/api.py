"""The API: a checkpoint and the questions the CLI asks of it, as methods.

Each method is the CLI command of the same name (its keyword arguments are the command's flags)
and calls the same gatherer; the CLI prints what these return. Every call is one question: each
remote folder is listed once in it and listed again by the next (a running query adds files).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from analysis.core.errors import InvalidInput, StateLensError, option
from statelens import results

R = TypeVar("R")


@contextlib.contextmanager
def question() -> Iterator[None]:
    """The block is one question (a CLI command): each remote folder is listed once in it, whichever
    methods it calls."""
    from spark_io.storage import question as asked

    with asked():
        yield


def _question(method: Callable[..., R]) -> Callable[..., R]:
    @functools.wraps(method)
    def asked(*args: Any, **kwargs: Any) -> R:
        from spark_io.storage import question

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
    from spark_io.readers import engine as engines
    from spark_io.runtime import session

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


def serve() -> tuple[str, bool]:
    """Start a local Spark Connect server once (``statelens serve``): later processes that need Spark
    use it instead of starting a JVM. Its URL, and whether this call started it."""
    from spark_io.runtime import serve as served

    return served.start()


def serving() -> str | None:
    """The URL of the warm engine ``serve()`` started, or None."""
    from spark_io.runtime import serve as served

    return served.running()


def stop_serving() -> bool:
    """Stop the warm engine; whether one was running."""
    from spark_io.runtime import serve as served

    return served.stop()


@contextlib.contextmanager
def downloads(report: Callable[[int, int, int], None]) -> Iterator[None]:
    """Inside the block, downloads from object storage that take over a second call
    ``report(bytes_done, bytes_total, files)`` as they go."""
    from spark_io.storage import downloads as storage_downloads

    with storage_downloads.reporting(report):
        yield


def limits() -> dict[str, float]:
    """The SQL gateway's defaults: ``row_budget`` (most rows a table loads), ``timeout`` (seconds)."""
    from spark_io.gather.limits import DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT

    return {"row_budget": DEFAULT_ROW_BUDGET, "timeout": DEFAULT_TIMEOUT}


@_question
def ls(prefix: str, sort: str = "problems") -> results.Listing:
    """Every checkpoint under a local folder or an object-storage prefix, one row each (no JVM)."""
    from analysis.runs.fleet import sort_rows
    from spark_io.gather.fleet import list_checkpoints

    return results.Listing(prefix, sort_rows(list_checkpoints(prefix), sort))


def open(path: str) -> Checkpoint:
    """A checkpoint (the folder given to the query as ``checkpointLocation``): local, ``s3://``,
    ``abfss://``, ``gs://`` or ``hdfs://``. It is read when asked, never written."""
    cp = Checkpoint(path)
    cp._files()  # a path that is not a checkpoint fails here, with the CLI's message (a damaged one does not)
    return cp


class Checkpoint:
    """One checkpoint. Each method reads it afresh (a running query commits new batches); SQL
    keeps the tables it loaded per batch."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._workspaces: dict[tuple[Any, ...], Any] = {}

    def __repr__(self) -> str:
        return f"statelens.open({self.path!r})"

    @_question
    def _files(self) -> Any:
        """The checkpoint's folders and files (``spark_io.logs.files.Files``), listed, not read."""
        from spark_io.logs.files import open_files

        return open_files(self.path)

    @_question
    def info(self) -> Any:
        """The checkpoint's logs and metadata (``analysis.core.model.CheckpointInfo``), no JVM."""
        from spark_io.logs.checkpoint import read_checkpoint

        return read_checkpoint(self.path)

    @_question
    def overview(self) -> results.Overview:
        """Query id, batches and watermarks, operators and stores (no JVM)."""
        return results.Overview(self.info())

    @_question
    def doctor(self, event_log: str | None = None, error: str | None = None) -> results.Doctor:
        """Is the checkpoint whole; where a restart starts, what it reads, what it may change.
        ``event_log``: whether the query's last run still runs (or a repartition's duration);
        ``error``: a failed restart's error text or event log, explained."""
        from spark_io.logs.checkpoint import doctor, read_checkpoint

        run, runs = None, None
        if event_log:
            from spark_io.logs.event_logs import read_progress, repartition_runs

            runs = repartition_runs(event_log)  # an application that repartitioned the state offline
            try:
                run = read_progress(event_log, read_checkpoint(self.path)).run
            except StateLensError:
                if not runs:  # neither the query's run nor a repartition: the log is not this checkpoint's
                    raise
        explained = None
        if error:
            from analysis.checkpoint.doctor import RunState
            from spark_io.logs.checkpoint import explain_restart_error
            from spark_io.logs.event_logs import read_error_source

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
        from analysis.runs.progress import batch_rows, operator_mismatch, snapshot_lags
        from spark_io.logs.checkpoint import read_checkpoint, read_source_offsets

        info = read_checkpoint(self.path)
        log = None
        if event_log:
            from spark_io.logs.event_logs import read_progress

            log = read_progress(event_log, info)
        rows = batch_rows(info, read_source_offsets(self.path), log)
        mismatch = operator_mismatch(log, info) if log else None
        notes = (log.notes if log else []) + ([f"Operators could not be matched: {mismatch}."] if mismatch else [])
        return results.Progress(info, log, rows, notes, snapshot_lags(log) if log else [])

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
        from analysis.core.question import KeyQuestion
        from analysis.runs.progress import parse_event_time

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
        what ``why_missing`` asks: ``cp.ask(statelens.KeyQuestion(("ord-42",), event_log=...))``."""
        from spark_io.gather.diagnosis import why_missing

        report = why_missing(self.path, q)
        return results.QueryAnswers(report) if q.whole_query else results.Answers(report)

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
        from spark_io.gather.unmatched import unmatched

        return results.Unmatched(unmatched(self.path, operator, batch, since, join_type=join_type, event_log=event_log))

    @_question
    def skew(self, operator: int | None = None, store: str | None = None, batch: int | None = None) -> results.Skew:
        """Rows and bytes per partition of one store, skew ratios, hot keys."""
        from spark_io.gather.checkup import skew

        return results.Skew(skew(self.path, operator, store, batch))

    @_question
    def growth(self, operator: int | None = None, store: str | None = None) -> results.Growth:
        """Rows and bytes per batch from the change feed, with findings."""
        from spark_io.gather.checkup import growth

        return results.Growth(growth(self.path, operator, store))

    @_question
    def chart(self, name: str, operator: int | None = None, store: str | None = None, batch: int | None = None) -> results.Chart:
        """One of the health charts with its data: ``watermark`` (per batch), ``skew`` (rows and bytes
        per partition of a store at ``batch``) or ``growth`` (rows and bytes per batch)."""
        from analysis.charts import charts

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
        from spark_io.gather.checkup import checkup

        c = checkup(self.path, event_log=event_log)
        answers = None
        if keys:
            from analysis.core.question import KeyQuestion
            from spark_io.gather.diagnosis import why_missing

            q = KeyQuestion(tuple(str(k) for k in keys), event_log=event_log, input_root=input_root, sink=sink)
            answers = why_missing(self.path, q, info=c.info).results
        return results.Report(c, answers)

    @_question
    def repartition(self, partitions: int, operator: int | None = None) -> results.Repartition:
        """What repartitioning the state to ``partitions`` would do (nothing is written)."""
        from spark_io.gather.repartition import repartition_preview

        return results.Repartition(repartition_preview(self.path, partitions, operator))

    @_question
    def preflight(self, command: list[str], event_log: str | None = None, timeout: float = 900) -> results.Preflight:
        """Run the changed job (``["python", "job.py", ...]``, as deployed) against a scratch copy:
        does it restart on this checkpoint, by Spark's own checks, and what would behave otherwise."""
        from spark_io.preflight import preflight

        return results.Preflight(preflight(self.path, list(command), event_log=event_log, timeout=timeout))

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
        from analysis.core.model import resolve_batch
        from spark_io.gather.limits import DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT
        from spark_io.gather.workspace import Workspace
        from spark_io.readers.state_reader import RowFilter

        info = self.info()
        resolved = resolve_batch(info, batch) if info.operators else None
        options = (resolved, row_budget, tuple(partitions or ()), spill, timeout)
        ws = self._workspaces.get(options)
        if ws is None:
            spill_dir = None
            if spill:
                from spark_io.runtime.session import scratch_dir

                spill_dir = os.path.join(scratch_dir(), "spill")
            ws = self._workspaces[options] = Workspace(
                self.path,
                resolved,
                row_budget=DEFAULT_ROW_BUDGET if row_budget is None else row_budget,
                row_filter=RowFilter(partitions=tuple(partitions)) if partitions else None,
                spill_dir=spill_dir,
                timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
            )
        return ws

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
        from analysis.core.model import default_operator, operator_of, resolve_batch
        from spark_io.gather.checkup import default_store, source_for
        from spark_io.readers import engine

        info = self.info()
        op = default_operator(info) if operator is None else operator_of(info, operator)
        source = source_for(op, store or default_store(op))
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
