"""A change to the query: the repartition preview, the preflight of a changed job, the rebuild."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statelens import results
from statelens.opened import Opened, _question


class AskChange(Opened):
    """A change to the query: the repartition preview, the preflight of a changed job, the rebuild."""

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
