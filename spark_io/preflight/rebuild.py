"""``statelens rebuild``: the state the changed job would have had, had it always run, in a new checkpoint.

The changed job runs as the user runs it (as for ``preflight``: ``boot/`` first on its
``PYTHONPATH``); its query on the old checkpoint is replayed there (``redirect.run_replay``) into
the new checkpoint and Spark's ``noop`` sink: each old batch's offsets are put into the new
checkpoint as Spark wrote them, and Spark re-runs that batch with the changed query, writing its
state files and commit. The job process asks this side at each batch's end (the first brings the
plan Spark made: a changed watermark delay stops the replay unless accepted) and at the end, for a
scratch copy of the new checkpoint on which the changed job is judged as ``preflight`` judges it.

The old checkpoint is only read; the job's sink is never written; the new checkpoint must not
exist or be empty, and is removed again when the replay is refused or fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statelens.analysis.checkpoint.change import Preflight, Warning, delay_from_state, plan_warnings
from statelens.analysis.checkpoint.rebuild import OperatorCount, Rebuild, ReplayedBatch, replay_refusal, source_notes
from statelens.analysis.core.errors import InvalidInput
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.plan.query_plan import query_plan
from statelens.spark_io.logs.checkpoint import read_checkpoint, read_key_fields, read_source_offsets
from statelens.spark_io.preflight import JobProcess, _judged, _old_plan, _planned, no_command, pinned_confs, redirect
from statelens.spark_io.preflight.scratch import scratch_copy
from statelens.spark_io.preflight.sink import file_sink, prepare_log
from statelens.spark_io.preflight.stored import state_size, stored_facts
from statelens.spark_io.runtime.scratch import session_dir
from statelens.spark_io.storage import gate
from statelens.spark_io.storage.gate import check_allowed, vet_tree
from statelens.spark_io.storage.locations import is_local, local_path

# sources whose offsets look replayable but whose input is gone once read (their descriptions in progress)
UNREPLAYABLE = ("TextSocket", "Memory")  # TextSocketV2[...], MemoryStream[...]
# batch index (1-based), batches in all, the batch id, its input rows
Progress = Callable[[int, int, int, int], None]


def _local(path: str, what: str) -> Path:
    if not is_local(path):
        raise InvalidInput(f"{what} {path} is not a local folder: rebuild reads and writes local checkpoints only.")
    return Path(local_path(path)).resolve()


def _target(old: Path, to: str) -> Path:
    check_allowed(to)  # the new checkpoint, before it is touched (STATELENS_ALLOWED_ROOTS, a signed-in user's roots)
    new = _local(to, "The new checkpoint")
    if new == old or old in new.parents or new in old.parents:
        raise InvalidInput(f"The new checkpoint {to} must be a folder apart from the old one, {old}.")
    if new.exists() and (not new.is_dir() or any(new.iterdir())):
        raise InvalidInput(f"The new checkpoint {to} must not exist or be empty: it holds files.")
    return new


def _new_sink(sink_to: str, new: Path) -> str:
    """The new folder ``--sink-to`` names, once it may be written: local, inside the bounds, not the new
    checkpoint, and absent or empty."""
    check_allowed(sink_to, "sink")
    folder = _local(sink_to, "The new sink folder")
    if folder == new or new in folder.parents or folder in new.parents:
        raise InvalidInput(f"The new sink folder {sink_to} must be a folder apart from the new checkpoint {new}.")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InvalidInput(f"The new sink folder {sink_to} must not exist or be empty: it holds files.")
    return str(folder)


def _missing_inputs(sources: dict[int, Any]) -> list[str]:
    """The local input files the file sources' logs name that are gone. Each must lie inside the
    bounds first (the replay reads them): one that does not is refused, whether it exists or not."""
    missing = []
    for batch in sorted(sources):
        for s in sources[batch]:
            for f in s.files:
                if not is_local(f):
                    continue
                check_allowed(f, "input")
                try:
                    gate.stat(local_path(f))
                except FileNotFoundError:
                    missing.append(f)
    return missing


def _replay_plan(info: CheckpointInfo, old: Path, new: Path, exchange: Path) -> dict[str, Any]:
    """What the job process copies from the old checkpoint, before and at each batch (relative paths)."""
    first = [
        "metadata",
        *sorted(str(p.relative_to(old)) for p in (old / "sources").rglob("*") if p.is_file() and not p.name.endswith(".crc")),
    ]
    committed = [b.batch_id for b in info.committed_batches]
    return {
        "from": str(old),
        "to": str(new),
        "exchange": str(exchange),
        "first": first,
        "batches": [{"batch": b, "files": [f"offsets/{b}"]} for b in committed],
        "pending": [f"offsets/{b}" for b in info.uncommitted],
    }


def _cause(error: str) -> str:
    """What a failure says: the Python exception a job's function raised (a traceback's last line), else
    Spark's first line."""
    lines = [x.strip() for x in error.strip().splitlines() if x.strip()]
    raised = [x for x in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ", x)]
    return (raised[-1] if "Traceback" in error and raised else lines[0] if lines else "no message")[:300]


def _counts(info: CheckpointInfo, new_info: CheckpointInfo) -> list[OperatorCount]:
    before, after = state_size(info), state_size(new_info)
    ids = sorted({o.operator_id for o in info.operators} | {o.operator_id for o in new_info.operators})
    return [
        OperatorCount(i, *before.get(i, (None, None)), *after.get(i, (None, None)))  # type: ignore[arg-type]
        for i in ids
    ]


class _Replay:
    """This side of a replay: the checks before it, the answers to the job process, the outcome."""

    def __init__(
        self,
        checkpoint: str,
        to: str,
        event_log: str | None,
        accept_watermark_change: bool,
        progress: Progress | None,
        tmp: Path,
        sink_to: str | None = None,
    ) -> None:
        self.old = _local(checkpoint, "The checkpoint")
        self.info = read_checkpoint(str(self.old))
        self.new = _target(self.old, to)
        self.sink_to = _new_sink(sink_to, self.new) if sink_to else None
        self.job_sink: str | None = None  # the job's file sink folder (its first batch tells)
        vet_tree(str(self.old))  # the job process copies its files itself: no link may lead outside the bounds
        self.sources = read_source_offsets(str(self.old))
        refusal = replay_refusal(self.info, self.sources)
        if refusal:
            raise InvalidInput(refusal)
        missing = _missing_inputs(self.sources)
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise InvalidInput(
                f"The input file {missing[0]}{more} that the checkpoint's batches read is gone: the replay needs every "
                "file they read."
            )
        self.checkpoint, self.to = checkpoint, to
        self.event_log, self.accept, self.progress = event_log, accept_watermark_change, progress
        self.tmp = tmp
        (tmp / "exchange").mkdir()
        self.plan = _replay_plan(self.info, self.old, self.new, tmp / "exchange")
        self.created = not self.new.exists()
        self.accepted: list[Warning] = []
        self.scratch: Any = None

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["kind"] == "check":
            new_info = read_checkpoint(str(self.new))
            self.scratch = scratch_copy(new_info, self.tmp / "check")
            return {"scratch": str(self.scratch.path), "planned": _planned(self.scratch)}
        if self.progress:
            self.progress(message["index"] + 1, message["of"], message["batch"], message["input_rows"])
        if message["index"] == 0:
            lost = [d for d in message.get("sources") or [] if d.startswith(UNREPLAYABLE)]
            if lost:
                return {"stop": f"the source {lost[0]} keeps no input to read again: it cannot be replayed."}
            self.job_sink = file_sink(message.get("sink"))
            if self.sink_to and self.job_sink is None:
                told = message.get("sink") or {}
                return {
                    "stop": f"--sink-to prepares a new folder for a file sink, and the job writes "
                    f"{told.get('format') or 'no file sink'}{' ' + str(told['table']) if told.get('table') else ''}."
                }
            changed = self._watermark_changes(message.get("plan"))
            if changed and not self.accept:
                return {"stop": changed[0].detail}
            self.accepted = changed
        return {}

    def _watermark_changes(self, plan_text: str | None) -> list[Warning]:
        """A changed watermark delay: the replay keeps each old batch's watermark, which the changed job
        would not have had."""
        if not plan_text:
            return []
        new = query_plan(plan_text, empty_sources=True)
        if new is None:
            return []
        old = _old_plan(self.info, self.event_log)
        if old is not None:
            found, _ = plan_warnings(read_key_fields(str(self.old))[0], new, old, {})
        else:
            column = next(iter(new.watermark_delays)) if len(new.watermark_delays) == 1 else None
            found = delay_from_state(self.info, new, stored_facts(self.info, column).newest) if column else []
        return [
            Warning(
                w.kind,
                w.detail + " The replay keeps each old batch's watermark, so the rebuilt state is not what the changed job "
                "would have kept: give --accept-watermark-change to rebuild anyway.",
            )
            for w in found
            if w.kind == "watermark_delay_changed"
        ]

    def undo(self) -> None:
        """Leave the new checkpoint as it was: absent, or an empty folder."""
        if self.created:
            shutil.rmtree(self.new, ignore_errors=True)
        elif self.new.exists():
            for p in self.new.iterdir():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()

    def outcome(self, run: dict[str, Any]) -> Rebuild:
        if run.get("stopped") or run.get("error"):
            self.undo()
            if run.get("stopped"):
                raise InvalidInput(f"Not rebuilt: {run['stopped']}")
            first = _cause(str(run["error"]))
            raise InvalidInput(
                f"The changed job failed replaying batch {run.get('batch')} ({run.get('error_class') or 'error'}): {first}. "
                f"Nothing was kept in {self.to}."
            )
        new_info = read_checkpoint(str(self.new))
        check: Preflight = _judged(new_info, self.scratch, run["check"], None)
        pending = self.info.uncommitted[0] if self.info.uncommitted else None
        if self.sink_to:
            last = int(run["replayed"][-1]["batch"]) if run["replayed"] else -1
            prepare_log(self.job_sink, self.sink_to, pending if pending is not None else last + 1)
        return Rebuild(
            self.checkpoint,
            self.to,
            [ReplayedBatch(b["batch"], b["input_rows"], b["seconds"]) for b in run["replayed"]],
            float(run["seconds"]),
            _counts(self.info, new_info),
            check,
            self.accepted,
            pending,
            source_notes(self.sources),
            self.job_sink,
            self.sink_to,
        )


def rebuild(
    checkpoint: str,
    to: str,
    command: list[str],
    event_log: str | None = None,
    accept_watermark_change: bool = False,
    progress: Progress | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    sink_to: str | None = None,
) -> Rebuild:
    """Replay ``checkpoint``'s batches with the changed job (``command``, as deployed) into ``to``;
    ``sink_to``: a new folder prepared for its file sink (``prepare_log``)."""
    if not command:
        raise no_command("changed job's", "rebuild CHECKPOINT --to NEW_CHECKPOINT")
    with tempfile.TemporaryDirectory(prefix="rebuild-", dir=session_dir()) as tmp:
        replay = _Replay(checkpoint, to, event_log, accept_watermark_change, progress, Path(tmp), sink_to)
        plan_path = Path(tmp) / "plan.json"
        plan_path.write_text(json.dumps(replay.plan), "utf-8")
        env = {redirect.ENV_SCRATCH: str(Path(tmp) / "unused"), redirect.ENV_REPLAY: str(plan_path)}
        job = JobProcess(checkpoint, replay.info, Path(tmp), env)
        proc = job.start(command, cwd)
        began, exchange, asked = time.monotonic(), Path(tmp) / "exchange", 0
        try:
            while True:
                question = exchange / f"ask-{asked + 1}.json"
                if question.exists():
                    asked += 1
                    answer = replay.answer(json.loads(question.read_text("utf-8")))
                    (exchange / f".answer-{asked}.json").write_text(json.dumps(answer), "utf-8")
                    os.replace(exchange / f".answer-{asked}.json", exchange / f"answer-{asked}.json")
                    continue
                if proc.poll() is not None:
                    break
                if timeout is not None and time.monotonic() - began > timeout:
                    raise InvalidInput(f"The replay ran over {timeout:.0f} s and was stopped; {to} was removed.")
                time.sleep(0.05)
            run = job.result(proc.returncode)
        except BaseException:
            proc.kill()
            proc.wait()
            replay.undo()
            raise
        return replay.outcome(run)


def rebuild_writer(
    checkpoint: str,
    to: str,
    build: Callable[[Any], Any],
    spark: Any,
    event_log: str | None = None,
    accept_watermark_change: bool = False,
    progress: Progress | None = None,
    output_mode: str = "append",
    sink_to: str | None = None,
) -> Rebuild:
    """The Python API: ``build(spark)`` returns the changed query's ``DataStreamWriter``, or its
    streaming DataFrame (written in ``output_mode``); its replay runs in this process, in ``spark``."""
    with tempfile.TemporaryDirectory(prefix="rebuild-", dir=session_dir()) as tmp:
        replay = _Replay(checkpoint, to, event_log, accept_watermark_change, progress, Path(tmp), sink_to)
        built = build(spark)
        if hasattr(built, "trigger"):
            writer = built
        elif getattr(built, "isStreaming", False):
            writer = built.writeStream.outputMode(output_mode)
        else:
            raise InvalidInput("The function returned no streaming DataFrame or DataStreamWriter.")
        try:
            with pinned_confs(replay.info):
                run = redirect.run_replay(
                    writer, spark, hasattr(writer, "_write_proto"), replay.plan, replay.answer, redirect.sink_of(writer)
                )
        except BaseException:
            replay.undo()
            raise
        return replay.outcome(run)
