"""The API's functions: open a checkpoint (``Checkpoint``: the questions the CLI asks of it, as
methods, in ``statelens.checkpoint``), list checkpoints, and what the process is set up with (the
engine, Spark, the warm server, the audit of refusals, downloads' progress, the SQL limits).

Each method is the CLI command of the same name (its keyword arguments are the command's flags)
and calls the same gatherer; the CLI prints what these return. Every call is one question: each
remote folder is listed once in it and listed again by the next (a running query adds files).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from statelens import results
from statelens.analysis.core.errors import InvalidInput, StateLensError, option
from statelens.checkpoint import Checkpoint
from statelens.opened import _question, question

__all__ = ["Checkpoint", "question"]  # re-exported: statelens.Checkpoint, statelens.question


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
    if not os.environ.get("STATELENS_POLICY", "").strip():  # no policy (policy.policy_path): not even its module is read
        return
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
    from statelens.spark_io.runtime import serve_address

    return serve_address.running()


def shown_url(url: str) -> str:
    """A Spark Connect URL without its token, to print."""
    from statelens.spark_io.runtime import serve_address

    return serve_address.shown(url)


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


@_question
def open_pipeline(root: str, data_root: str | None = None, event_log: str | None = None) -> Any:
    """The queries under ``root`` (a folder or bucket prefix holding checkpoints at any depth, a
    Declarative Pipeline's storage root) and the hops between them: which table each writes and reads,
    and which upstream batches each downstream batch read (``analysis.pipeline.model.Pipeline``).
    ``data_root``: where the tables are now, when not where the logs say (a pipeline's warehouse);
    ``event_log``: the applications' event logs (their progress names each query's sink: a table's
    writer when its log's times cannot tell it, e.g. a copy that lost them). No JVM."""
    from statelens.spark_io.gather.pipeline import open_pipeline as found

    return found(root, data_root, event_log=event_log)


@_question
def sql_across(root: str, query: str, data_root: str | None = None, max_rows: int = 10_000) -> results.Rows:
    """DuckDB SQL over the state of every query under ``root`` at once: each query is a schema named as
    ``open_pipeline`` names it, holding its own SQL's tables (``SELECT ... FROM silver.op0 JOIN
    gold.op0 ...``), each at its query's last committed batch."""
    from statelens.spark_io.gather.pipeline import open_pipeline as found
    from statelens.spark_io.gather.pipeline_sql import PipelineSql

    gateway = PipelineSql(found(root, data_root))
    result, batches = gateway.execute(query, max_rows)
    at = ", ".join(f"{q} at batch {b}" for q, b in batches.items())
    return results.Rows(result.table, f"SQL across the pipeline: {at}", gateway.engines(), result.truncated, [])


@_question
def why_missing_across(
    root: str,
    *keys: str,
    key_field: str | Mapping[str, str] | None = None,
    event_log: str | None = None,
    data_root: str | None = None,
    input_root: str | None = None,
) -> list[Any]:
    """Each key followed through every query under ``root``, from the first query's input (``input_root``,
    when its files moved) through each table to the last: per key its outcome at the pipeline's end,
    the cause and the query, operator and batch it happened in (with the upstream batch that wrote the
    record's file), and each query's own answer (``analysis.pipeline.fate.PipelineKeyAnswer``).
    ``key_field``: the keys' column; where a query renamed it, that query's column too, as
    ``"user,gold=customer"`` or ``{"": "user", "gold": "customer"}``."""
    from statelens.analysis.pipeline.model import key_fields
    from statelens.spark_io.gather.pipeline import open_pipeline as found
    from statelens.spark_io.gather.pipeline import why_missing_across as across

    if not keys:
        raise InvalidInput("Give the keys to explain: statelens.why_missing_across(root, 'ord-42', key_field=...).")
    fields = key_fields(key_field) if isinstance(key_field, str) else key_field
    pipeline = found(root, data_root, event_log=event_log)
    return across(pipeline, [str(k) for k in keys], fields, event_log, (input_root,) if input_root else ())


def open(path: str, keep: bool = False) -> Checkpoint:
    """A checkpoint (the folder given to the query as ``checkpointLocation``): local, ``s3://``,
    ``abfss://``, ``gs://`` or ``hdfs://``. It is read when asked, never written. ``keep``: keep what
    was read for the questions after (the app holds one such object per committed batch); without
    it each method reads afresh (a running query commits new batches)."""
    cp = Checkpoint(path, keep=keep)
    cp._files()  # a path that is not a checkpoint fails here, with the CLI's message (a damaged one does not)
    return cp
