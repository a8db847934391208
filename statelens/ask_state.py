"""The state itself: SQL over every store, a store at a batch, its change feed, the state metadata, and each checked against Spark."""

from __future__ import annotations

from typing import Any

from statelens import results
from statelens.opened import Opened, _question


class AskState(Opened):
    """The state itself: SQL over every store, a store at a batch, its change feed, the state metadata, and each checked against Spark."""

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
