"""The checkpoint's own log: its operators and stores, its files, the doctor, the query's progress."""

from __future__ import annotations

from typing import Any

from statelens import results
from statelens.analysis.core.errors import InvalidInput, StateLensError, option
from statelens.opened import Opened, _question


class AskLog(Opened):
    """The checkpoint's own log: its operators and stores, its files, the doctor, the query's progress."""

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
