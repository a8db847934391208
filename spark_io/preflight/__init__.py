"""``statelens preflight``: will the changed query restart on this checkpoint? Spark answers.

The job runs as the user runs it (``python job.py ...``, ``spark-submit job.py ...``) with
``boot/`` first on its ``PYTHONPATH``: PySpark's writers are patched before the job's code runs
(``redirect.py``). The query on the judged checkpoint starts on a scratch copy of it
(``scratch.py``) into the ``noop`` sink for the one batch it would run next; other queries and batch
writes of the job are not made. Spark plans that batch with every restart check and runs it, or
raises; ``analysis.checkpoint.change`` explains the outcome. ``judge_writer`` does the same in
this process for a writer or streaming DataFrame a function of the user's returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from statelens.analysis.checkpoint.change import Preflight, judge, sink_warnings
from statelens.analysis.core.errors import InvalidInput, StateLensError, from_cli
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.plan.query_plan import QueryPlan, query_plan
from statelens.spark_io.logs.checkpoint import family_schemas, read_checkpoint, read_key_fields
from statelens.spark_io.logs.files import StorageFiles
from statelens.spark_io.preflight import redirect
from statelens.spark_io.preflight.scratch import Scratch, scratch_copy
from statelens.spark_io.preflight.sink import sink_columns
from statelens.spark_io.preflight.stored import StoredFacts, state_size, stored_facts
from statelens.spark_io.runtime.policy import check_job
from statelens.spark_io.runtime.scratch import session_dir
from statelens.spark_io.storage import LocalStorage

BOOT = Path(__file__).resolve().parent / "boot"
TIMEOUT_S = 900


def _old_plan(info: CheckpointInfo, event_log: str | None) -> QueryPlan | None:
    if not event_log:
        return None
    from statelens.spark_io.logs.event_logs import read_progress

    return read_progress(event_log, info).query_plan()


def _judged(info: CheckpointInfo, scratch: Scratch, run: dict[str, Any], event_log: str | None) -> Preflight:
    plan = query_plan(run["plan"], empty_sources=True) if run.get("plan") else None
    old = _old_plan(info, event_log)
    column = next(iter(plan.watermark_delays)) if plan is not None and old is None and len(plan.watermark_delays) == 1 else None
    facts = stored_facts(info, column) if plan is not None else StoredFacts()
    result = judge(
        info,
        run,
        read_key_fields(info.path)[0],
        scratch.batch,
        plan,
        old,
        facts.widths,
        state_size(info) if run.get("error") else None,
        facts.newest,
        (family_schemas(info.path), None if run.get("error") else family_schemas(str(scratch.path), _scratch_files(scratch))),
    )
    if event_log is None and plan is None and not run.get("error"):
        result.not_checked.append("the new plan: Spark Connect does not hand it over")
    result.not_checked += [f"the stored windows and event times of {u}" for u in facts.unread]
    if result.verdict == "restarts":
        try:
            columns = sink_columns(run.get("sink") or {}, run.get("output_schema"))
        except StateLensError as e:  # unreadable, or outside what may be read
            result.not_checked.append(f"the columns of the job's sink files against the new output: {e.message}")
        else:
            if columns is not None:
                result.warnings += sink_warnings(run["sink"], *columns)
    return result


def _scratch_files(scratch: Scratch) -> StorageFiles:
    """The scratch copy's files (ours, outside the user's allowed roots)."""
    return StorageFiles(LocalStorage(str(scratch.path), own=True))


def _confs(info: CheckpointInfo) -> list[str]:
    return sorted(info.conf)


def _planned(scratch: Scratch) -> tuple[str, str] | None:
    return (f"offsets/{scratch.batch}", scratch.planned_offsets) if scratch.planned_offsets else None


def no_command(verb: str, usage: str) -> InvalidInput:
    return InvalidInput(
        f"Give the {verb} command after --, as you run it: statelens {usage} -- python job.py ..."
        if from_cli()
        else f'Give the {verb} command as you run it: command=["python", "job.py", ...].'
    )


class JobProcess:
    """The user's job run as they run it, with ``boot/`` first on its ``PYTHONPATH`` (its writers
    patched, ``redirect``), ``env`` (``redirect``'s settings) added; it writes its result and its
    output into ``folder``."""

    def __init__(self, checkpoint: str, info: CheckpointInfo, folder: Path, env: dict[str, str]) -> None:
        self.checkpoint, self.result_path, self.log_path = checkpoint, folder / "result.json", folder / "job.log"
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join([str(BOOT)] + [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p])
        self.env[redirect.ENV_CHECKPOINT] = checkpoint
        self.env[redirect.ENV_RESULT] = str(self.result_path)
        self.env[redirect.ENV_CONFS] = json.dumps(_confs(info))
        self.env.update(env)

    def start(self, command: list[str], cwd: str | None) -> subprocess.Popen[bytes]:
        """The job started, once the signed-in user (on a shared server) may run it (``check_job``)."""
        cwd = check_job(command, cwd)
        exe = shutil.which(command[0]) or command[0]
        try:
            with open(self.log_path, "wb") as log:
                return subprocess.Popen(
                    [exe, *command[1:]], env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd
                )
        except FileNotFoundError as e:
            raise InvalidInput(
                f"Cannot run {command[0]}: {e.strerror}. Give the job's command as you run it{', after --' if from_cli() else ''}."
            ) from e

    def result(self, code: int | None) -> dict[str, Any]:
        """What the job process wrote; a job that started no query on the checkpoint is refused (why)."""
        run: dict[str, Any] = json.loads(self.result_path.read_text("utf-8")) if self.result_path.exists() else {"no_query": True}
        if run.get("no_query"):
            log = self.log_path.read_text("utf-8", "replace")
            raise InvalidInput(_no_query(self.checkpoint, code, log, [str(q) for q in run.get("other_queries") or []]))
        return run


def preflight(
    checkpoint: str, command: list[str], event_log: str | None = None, timeout: float = TIMEOUT_S, cwd: str | None = None
) -> Preflight:
    """Run ``command`` (the changed job, as the user runs it) against a scratch copy of ``checkpoint``."""
    if not command:
        raise no_command("job's", "preflight CHECKPOINT")
    info = read_checkpoint(checkpoint)
    with tempfile.TemporaryDirectory(prefix="preflight-", dir=session_dir()) as tmp:
        scratch = scratch_copy(info, Path(tmp) / "checkpoint")
        env = {redirect.ENV_SCRATCH: str(scratch.path), redirect.ENV_PLANNED: json.dumps(_planned(scratch))}
        job = JobProcess(checkpoint, info, Path(tmp), env)
        proc = job.start(command, cwd)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            proc.kill()
            proc.wait()
            raise InvalidInput(
                f"The job ran {timeout:.0f} s without starting a streaming query on {checkpoint}: check that it is the "
                "command that runs the query, with this checkpoint."
            ) from e
        return _judged(info, scratch, job.result(code), event_log)


def _no_query(checkpoint: str, code: int | None, log: str, others: list[str]) -> str:
    """Why no verdict: the queries the job started elsewhere, or the job's last error."""
    if others:
        why = "it started " + "; ".join(others)
    else:
        lines = [x.strip() for x in log.splitlines() if x.strip()]
        why = next((x for x in reversed(lines) if "Error" in x or "Exception" in x), lines[-1] if lines else "no output")[:300]
    return (
        f"The job ended (exit code {code}) without starting a streaming query on {checkpoint}: {why}. "
        "Give the command that starts the query on this checkpoint, as you deploy it."
    )


@contextlib.contextmanager
def pinned_confs(info: CheckpointInfo) -> Iterator[None]:
    """In this process (the Python API): the confs the checkpoint pins, for ``redirect`` to read."""
    old = os.environ.get(redirect.ENV_CONFS)
    os.environ[redirect.ENV_CONFS] = json.dumps(_confs(info))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(redirect.ENV_CONFS, None)
        else:
            os.environ[redirect.ENV_CONFS] = old


def judge_writer(checkpoint: str, build: Callable[[Any], Any], spark: Any, event_log: str | None = None) -> Preflight:
    """The Python API: ``build(spark)`` returns the changed query's streaming DataFrame or its
    ``DataStreamWriter``; it is started here, on a scratch copy, into ``noop``, for one batch."""
    info = read_checkpoint(checkpoint)
    with tempfile.TemporaryDirectory(prefix="preflight-", dir=session_dir()) as tmp:
        scratch = scratch_copy(info, Path(tmp) / "checkpoint")
        built = build(spark)
        if hasattr(built, "trigger"):  # a DataStreamWriter
            writers = [built]
        elif getattr(built, "isStreaming", False):  # a DataFrame: the first output mode Spark accepts for it
            writers = [built.writeStream.outputMode(mode) for mode in ("append", "update", "complete")]
        else:
            raise InvalidInput("The function returned no streaming DataFrame or DataStreamWriter.")
        with pinned_confs(info):
            for writer in writers:
                run = redirect.run_redirected(
                    writer, spark, str(scratch.path), hasattr(writer, "_write_proto"), _planned(scratch)
                )
                if run.get("started") or "output mode" not in str(run.get("error")).lower():
                    break
        return _judged(info, scratch, run, event_log)


__all__ = ["Preflight", "judge_writer", "preflight"]
