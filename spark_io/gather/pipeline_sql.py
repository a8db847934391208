"""SQL over every query's state at once (``statelens sql ROOT``): a schema per query of the pipeline,
named as the pipeline names it (``silver``, ``gold``, ``a/b`` quoted), holding the tables its own SQL
has (``op0``, ``op0_changes``, join sides ...), so ``SELECT ... FROM silver.op0 JOIN gold.op0 ...``
works. Each query's tables load through its own workspace (its row budget, its engine); the query
runs on one locked DuckDB connection with each table it names under a name of its own."""

from __future__ import annotations

import re
from typing import Any

from statelens.analysis.core.errors import SqlError
from statelens.analysis.pipeline.model import Pipeline
from statelens.spark_io.gather.limits import DEFAULT_MAX_ROWS, DEFAULT_ROW_BUDGET, DEFAULT_TIMEOUT
from statelens.spark_io.gather.workspace import QueryResult, Workspace, explain, locked_connection, run_sql

_PART = r'"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*'
# strings and comments (kept as they are), or a qualified name: schema . table
_TOKENS = re.compile(rf"('(?:[^']|'')*'|--[^\n]*|/\*.*?\*/)|({_PART})\s*\.\s*({_PART})", re.S)


def _ident(part: str) -> str:
    return part[1:-1].replace('""', '"') if part.startswith('"') else part


class PipelineSql:
    """One DuckDB gateway over the state of every current query of a pipeline, at each one's last batch."""

    def __init__(self, pipeline: Pipeline, row_budget: int = DEFAULT_ROW_BUDGET, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.pipeline = pipeline
        self.row_budget = row_budget
        self.timeout = timeout
        self.queries = {q.name: q for q in pipeline.queries}  # superseded versions too: "gold@v0".op0
        self._workspaces: dict[str, Workspace] = {}
        self._con = locked_connection()

    def workspace(self, name: str) -> Workspace:
        if name not in self._workspaces:
            self._workspaces[name] = Workspace(self.queries[name].checkpoint, row_budget=self.row_budget, timeout=self.timeout)
        return self._workspaces[name]

    def engines(self) -> dict[str, str]:
        """``query.table`` -> who read it (native, spark), for every table loaded."""
        return {f"{q}.{t.spec.name}": t.engine for q, ws in self._workspaces.items() for t in ws.loaded.values()}

    def tables_hint(self) -> str:
        names = [f'"{n}"' if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) else n for n in self.queries]
        return f"Each query is a schema: {', '.join(names)}; its tables are its own SQL's (op0, op0_changes ...)."

    def execute(self, sql: str, max_rows: int = DEFAULT_MAX_ROWS) -> tuple[QueryResult, dict[str, int | None]]:
        """Run one query; returns the result and the batch each query named was read at."""
        tables: dict[str, Any] = {}
        batches: dict[str, int | None] = {}

        def swap(m: re.Match[str]) -> str:
            if m.group(1) is not None:
                return m.group(0)
            schema, table = _ident(m.group(2)), _ident(m.group(3))
            if schema not in self.queries or table.lower() not in self.workspace(schema).specs:
                return m.group(0)  # a struct's field (g.key), an alias's column: DuckDB's to read or refuse
            ws = self.workspace(schema)
            ws.load(table)
            inner = f"__{len(tables)}_{table.lower()}"
            tables[inner] = ws.arrow_of(table)
            batches[schema] = ws.batch
            return f'"{inner}"'

        rewritten = _TOKENS.sub(swap, sql)
        if not tables:
            raise SqlError(f"The query names no query's table. {self.tables_hint()}")
        return run_sql(self._con, tables, rewritten, max_rows, self.timeout, lambda e: explain(e, self.tables_hint())), batches
