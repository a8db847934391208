"""The DuckDB workspace: loaded state as SQL tables, and the one gateway that runs SQL.

Table names (documented in the README and shown in the app):

* ``op{operatorId}``                   an operator's default store
* ``op{operatorId}_{storeName}``       a named store, ``-`` replaced by ``_``
                                       (``op0_left_keyWithIndexToValue``)
* ``op{operatorId}_{left|right}``      a stream-stream join side
* ``op{operatorId}_{stateVarName}``    a transformWithState state variable
* any of the above + ``_changes``      the store's change feed over the retained batches

Tables load (``spark_io.readers.engine``: natively or through Spark) the first time a query names them, at the workspace's batch
(default: the last committed one). ``key`` and ``value`` stay STRUCT columns, so
``key.field0`` and ``value.order_time`` work as they do in Spark.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from statelens.analysis.core.errors import RowBudgetExceeded, SqlError, SqlRefused, option
from statelens.analysis.core.model import CheckpointInfo, StateSource, resolve_batch, sources_of, table_name
from statelens.spark_io.gather.limits import DEFAULT_MAX_ROWS, DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import engine
from statelens.spark_io.readers.state_reader import RowFilter
from statelens.spark_io.runtime import jobs
from statelens.spark_io.runtime.scratch import session_dir

LOCKED = (
    "State Lens SQL reads only this checkpoint's state tables: file functions (read_csv, read_parquet "
    "on paths, COPY ... TO), ATTACH, INSTALL/LOAD and configuration changes are disabled."
)


@dataclass(frozen=True)
class TableSpec:
    name: str
    source: StateSource
    changes: bool = False

    def describe(self) -> str:
        return ("change feed of " if self.changes else "") + self.source.describe()


def table_specs(info: CheckpointInfo) -> dict[str, TableSpec]:
    """Every table name this checkpoint offers, keyed by its lower-case name."""
    specs: dict[str, TableSpec] = {}
    for op in info.operators:
        for src in sources_of(op):
            name = table_name(src)
            specs[name.lower()] = TableSpec(name, src)
            if src.has_change_feed:
                specs[f"{name}_changes".lower()] = TableSpec(f"{name}_changes", src, changes=True)
    return specs


@dataclass
class LoadedTable:
    spec: TableSpec
    rows: int
    batch: str  # "12" or "0–12" for a change feed
    seconds: float
    spilled: str | None = None  # the Parquet folder DuckDB reads, when spilled
    engine: str = engine.SPARK  # which reader loaded it (native or spark)
    fallback: str | None = None  # why Spark loaded it although the native reader was asked first
    keys_only: bool = False  # its keys alone (KEY_COLUMNS): the queries so far read no value


@dataclass
class QueryResult:
    table: pa.Table
    truncated: bool  # more rows than max_rows existed
    seconds: float

    @property
    def columns(self) -> list[str]:
        return self.table.column_names


Loader = Callable[[CheckpointInfo, TableSpec, int, RowFilter | None, int | None, bool], tuple[pa.Table, str]]
KEY_COLUMNS = frozenset({"key", "partition_id"})  # what a store's keys-only read gives


def state_loader(
    info: CheckpointInfo,
    spec: TableSpec,
    batch: int,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
    keys_only: bool = False,
) -> tuple[pa.Table, str]:
    """Read one table's rows with the chosen engine: the state at ``batch`` or the change feed up to it
    (``keys_only``: a store's keys without decoding its values, where the engine can)."""
    if spec.changes:
        table, start, end = engine.read_changes(info.path, spec.source, end=batch, info=info, row_filter=row_filter, limit=limit)
        return table, f"{start}–{end}"
    table, b = engine.read_state(
        info.path, spec.source, batch, info=info, row_filter=row_filter, limit=limit, keys_only=keys_only
    )
    return table, str(b)


def _scans(plan: Any) -> Iterator[dict[str, Any]]:
    """The table scans of DuckDB's JSON plan."""
    if isinstance(plan, list):
        for p in plan:
            yield from _scans(p)
    elif isinstance(plan, dict):
        if "SCAN" in str(plan.get("name", "")) and isinstance(plan.get("extra_info"), dict):
            yield plan["extra_info"]
        yield from _scans(plan.get("children", []))


def columns_read(sql: str, schemas: dict[str, pa.Schema]) -> dict[str, set[str]]:
    """The top-level columns ``sql`` reads of each table, from DuckDB's own plan over empty tables
    of these schemas (its projection pushdown). Statistics and filter pushdown are off, so nothing
    is left out because the tables are empty and a filter's columns stay in the scan's projections.
    A table the plan does not scan, or a query that does not plan, is left out (not known)."""
    con = duckdb.connect(
        ":memory:",
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "enable_external_access": False,
            "disabled_optimizers": "statistics_propagation,filter_pushdown,empty_result_pullup",
        },
    )
    try:
        for name, schema in schemas.items():
            con.register("__empty", schema.empty_table())
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM __empty')
            con.unregister("__empty")
        plan = json.loads(con.execute("EXPLAIN (FORMAT JSON) " + sql).fetchall()[0][1])
    except (duckdb.Error, ValueError, IndexError, TypeError):
        return {}
    finally:
        con.close()
    read: dict[str, set[str]] = {}
    for scan in _scans(plan):
        projections = scan.get("Projections") or []
        names = [projections] if isinstance(projections, str) else list(projections)
        table = read.setdefault(str(scan.get("Table", "")).rsplit(".", 1)[-1].strip('"').lower(), set())
        table.update(n.split(".", 1)[0].strip('"') for n in names if n)
    return read


_IDENT = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_]*)')
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r"'(?:[^']|'')*'")


def locked_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reads what State Lens hands it (Arrow tables, and spilled tables as
    Arrow datasets, scanned by Arrow): no extensions, no configuration changes, no file outside its
    session's own DuckDB folder (where it spills a large sort: DuckDB allows its temporary folder,
    which holds nothing else). Its settings name that folder, not the server's home."""
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    # DuckDB allows its temporary folder; the others are names in the session's folder, never made
    # and not allowed (no extension is installed there, no secret kept)
    own = session_dir()
    for setting, folder in (
        ("temp_directory", session_dir("duckdb")),
        ("secret_directory", os.path.join(own, "duckdb-secrets")),
        ("extension_directory", os.path.join(own, "duckdb-extensions")),
    ):
        quoted = folder.replace("'", "''")
        con.execute(f"SET {setting} = '{quoted}'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def explain(e: duckdb.Error, hint: str) -> str:
    """DuckDB's error in one line; a table that does not exist with the tables there are (``hint``)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "does not exist" in msg and ("Table" in msg or "Catalog" in msg):
        return f"{msg} {hint}"
    return msg


def run_sql(
    con: duckdb.DuckDBPyConnection,
    tables: dict[str, Any],
    sql: str,
    max_rows: int,
    timeout: float,
    explain: Callable[[duckdb.Error], str],
) -> QueryResult:
    """One query on a cursor of ``con`` with ``tables`` (name -> Arrow table or dataset) registered:
    at most ``max_rows`` rows back, stopped past ``timeout`` seconds; DuckDB's errors as State Lens's."""
    t0 = time.perf_counter()
    cur = con.cursor()
    for name, table in tables.items():
        cur.register(name, table)
    timer = threading.Timer(timeout, cur.interrupt)
    timer.daemon = True
    timer.start()
    cancelled = threading.Event()

    def cancel() -> None:
        cancelled.set()
        cur.interrupt()

    try:
        with jobs.stopped_on_cancel(cancel):
            return _fetch(cur, sql, max_rows, t0)
    except duckdb.InterruptException as e:
        if cancelled.is_set():
            raise SqlError("The query was cancelled.") from e
        raise SqlError(
            f"The query ran longer than {timeout:g} s, the time limit, and was stopped. Narrow it (a filter, "
            f"a LIMIT) or raise the limit ({option('--timeout')}, STATELENS_SQL_TIMEOUT)."
        ) from e
    except duckdb.PermissionException as e:
        raise SqlRefused(LOCKED) from e
    except duckdb.Error as e:
        if "configuration has been locked" in str(e) or "Cannot change configuration" in str(e):
            raise SqlRefused(LOCKED) from e
        raise SqlError(explain(e)) from e
    finally:
        # the timer's thread holds the cursor until it ends: a process that exits while it still runs
        # (a refused query, then exit) has DuckDB print "nanobind: leaked ... instances" on stderr
        timer.cancel()
        timer.join()
        cur.close()


def _fetch(cur: duckdb.DuckDBPyConnection, sql: str, max_rows: int, t0: float) -> QueryResult:
    """The query's first ``max_rows`` rows (and whether there were more)."""
    rel = cur.sql(sql)
    if rel is None:  # a statement without a result
        return QueryResult(pa.table({}), False, time.perf_counter() - t0)
    reader = rel.to_arrow_reader(min(max_rows + 1, 65_536))
    batches, rows = [], 0
    for batch in reader:
        batches.append(batch)
        rows += batch.num_rows
        if rows > max_rows:
            break
    result = pa.Table.from_batches(batches, schema=reader.schema)
    truncated = result.num_rows > max_rows
    return QueryResult(result.slice(0, max_rows) if truncated else result, truncated, time.perf_counter() - t0)


class Workspace:
    """One DuckDB connection over one checkpoint at one batch."""

    def __init__(
        self,
        path: str,
        batch_id: int | None = None,
        loader: Loader = state_loader,
        row_budget: int = DEFAULT_ROW_BUDGET,
        row_filter: RowFilter | None = None,
        spill_dir: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """``row_budget``: most rows a table may load into memory; past it the load stops with
        advice, unless ``spill_dir`` is set (the rows go to Parquet there and Arrow reads them
        from disk). ``row_filter`` is applied inside Spark to every table before loading."""
        self.row_budget = row_budget
        self.row_filter = row_filter or None
        self.spill_dir = spill_dir
        self.timeout = timeout
        self.info = read_checkpoint(path)
        self.batch = resolve_batch(self.info, batch_id) if self.info.operators else None
        self.specs = table_specs(self.info)
        self.loaded: dict[str, LoadedTable] = {}
        self._loader = loader
        self._con = locked_connection()
        self._arrow: dict[
            str, Any
        ] = {}  # loaded tables (Arrow tables, spilled ones as datasets), registered on each query's cursor
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- tables

    def tables_named_in(self, sql: str) -> list[TableSpec]:
        """The workspace tables a query mentions (outside strings and comments)."""
        text = _STRING.sub("''", _COMMENT.sub(" ", sql))
        found: dict[str, TableSpec] = {}
        for quoted, bare in _IDENT.findall(text):
            name = (quoted.replace('""', '"') if quoted else bare).lower()
            if name in self.specs:
                found[name] = self.specs[name]
        return list(found.values())

    def load(self, name: str, keys_only: bool = False) -> LoadedTable:
        """Load a table (``keys_only``: its keys may do; a table loaded so is loaded again whole
        when a query reads its values)."""
        key = name.lower()
        with self._lock:
            have = self.loaded.get(key)
            if have is not None and (keys_only or not have.keys_only):
                return have
            spec = self.specs.get(key)
            if spec is None:
                raise SqlError(f"There is no table '{name}' for this checkpoint. {self.tables_hint()}")
            assert self.batch is not None
            t0 = time.perf_counter()
            table, batch = self._loader(self.info, spec, self.batch, self.row_filter, self.row_budget + 1, keys_only)
            if table.num_rows > self.row_budget:
                if self.spill_dir is None or spec.changes:
                    raise RowBudgetExceeded(self._budget_advice(spec))
                loaded = self._spill(spec, t0)
            else:
                # not copied: DuckDB scans the Arrow table where it is, so the sessions that load the
                # same store share one decoded copy (the app's cached reads hand every one the same table)
                self._arrow[spec.name] = table
                loaded = LoadedTable(
                    spec,
                    table.num_rows,
                    batch,
                    time.perf_counter() - t0,
                    engine=engine.engine_of(table),
                    fallback=engine.fallback_of(table),
                    keys_only=keys_only and set(table.column_names) <= KEY_COLUMNS,
                )
            self.loaded[key] = loaded
            return loaded

    def _budget_advice(self, spec: TableSpec) -> str:
        where = f" ({self.row_filter.describe()})" if self.row_filter else ""
        spill = (
            ""
            if spec.changes
            else f", or spill it to Parquet so DuckDB reads it from disk ({option('--spill', python='True', page='SQL page: Loading')})"
        )
        return (
            f"{spec.name}{where} holds more than {self.row_budget:,} rows at batch {self.batch}, the row budget. "
            f"Load less: filter by partition or key ({option('--partitions', '0,3', '[0, 3]', 'SQL page: Loading')}), raise the budget "
            f"({option('--row-budget', 'N')} or STATELENS_ROW_BUDGET){spill}."
        )

    def _spill(self, spec: TableSpec, t0: float) -> LoadedTable:
        assert self.spill_dir is not None and self.batch is not None
        dest = os.path.join(self.spill_dir, f"{spec.name}-b{self.batch}-{uuid.uuid4().hex[:8]}")
        _, by, why = engine.spill_state(self.info.path, spec.source, self.batch, dest, info=self.info, row_filter=self.row_filter)
        import pyarrow.dataset as ds

        spilled = ds.dataset(dest, format="parquet")
        self._arrow[spec.name] = spilled  # scanned by Arrow: DuckDB itself opens no file
        return LoadedTable(
            spec, spilled.count_rows(), str(self.batch), time.perf_counter() - t0, spilled=dest, engine=by, fallback=why
        )

    def _columns_read(self, sql: str, named: list[TableSpec]) -> dict[str, set[str]]:
        """What the query reads of each table it names, when every one of them can be read natively
        (else nothing is known: the tables load whole)."""
        if all(s.changes for s in named):
            return {}
        schemas = {}
        for spec in named:
            schema = engine.state_schema(self.info, spec.source, spec.changes)
            if schema is None:
                return {}
            schemas[spec.name] = schema
        return columns_read(sql, schemas)

    def tables_hint(self) -> str:
        if not self.specs:
            return "This checkpoint has no state tables."
        names = [s.name for s in self.specs.values() if not s.changes]
        return f"Tables: {', '.join(names)} (add _changes for a change feed)."

    # ---------------------------------------------------------------- SQL

    def execute(self, sql: str, max_rows: int = DEFAULT_MAX_ROWS) -> QueryResult:
        """Run one query, loading the tables it names first; at most ``max_rows`` rows come back."""
        if not sql.strip() or not _COMMENT.sub("", sql).strip().strip(";").strip():
            raise SqlError("The query is empty: write a SQL statement, e.g. SELECT * FROM op0 LIMIT 10.")
        named = self.tables_named_in(sql)
        read = self._columns_read(sql, named)
        for spec in named:
            columns = read.get(spec.name.lower())
            self.load(spec.name, keys_only=not spec.changes and columns is not None and columns <= KEY_COLUMNS)
        try:
            return self._run(sql, max_rows)
        except SqlError as e:
            partial = [s for s in named if self.loaded[s.name.lower()].keys_only]
            if not partial or "Binder Error" not in e.message:
                raise
        for spec in partial:  # it names a value after all (EXCLUDE (value)): the tables whole
            self.load(spec.name)
        return self._run(sql, max_rows)

    def _run(self, sql: str, max_rows: int) -> QueryResult:
        with self._lock:
            return run_sql(self._con, self._arrow, sql, max_rows, self.timeout, self._explain)

    def arrow_of(self, name: str) -> Any:
        """A loaded table's rows (an Arrow table, or a spilled table's dataset)."""
        return self._arrow[self.specs[name.lower()].name]

    def _explain(self, e: duckdb.Error) -> str:
        return explain(e, self.tables_hint())

    def close(self) -> None:
        """The connection closed and the spilled tables' files removed."""
        self._con.close()
        for t in self.loaded.values():
            if t.spilled:
                shutil.rmtree(t.spilled, ignore_errors=True)
