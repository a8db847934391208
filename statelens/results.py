"""What the API returns: the gatherers' reports, each able to show itself in a notebook.

Every result has ``to_dict()`` (exactly what the CLI prints with ``--json``), ``to_arrow()`` and
``to_pandas()`` (its main table), ``figures`` (the app's charts, Plotly figures) and
``_repr_html_`` (Jupyter and Databricks draw it); the report it wraps is ``.report``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from statelens import render


def json_value(v: Any) -> Any:
    """How values JSON has no type for are written (the CLI's --json and ``to_dict``)."""
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    return str(v)


def jsonable(obj: Any) -> Any:
    """``obj`` as the CLI's JSON has it: plain dicts, lists, strings and numbers."""
    return json.loads(json.dumps(obj, default=json_value, ensure_ascii=False))


def _utc(ms: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC) if ms else None


class Result:
    """One answer. Subclasses give ``report`` (or ``_data``: the CLI's JSON before encoding),
    ``to_arrow``, ``_summary`` and ``_body``."""

    title = "State Lens"
    report: Any = None

    def _data(self) -> Any:
        return self.report.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` answer, as Python objects."""
        return jsonable(self._data())  # type: ignore[no-any-return]

    def to_arrow(self) -> pa.Table:
        raise NotImplementedError

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()

    @property
    def figures(self) -> list[tuple[str, Any]]:
        """The charts, titled: ``(title, plotly Figure)``."""
        return []

    def _summary(self) -> list[str]:
        return []

    def _body(self) -> list[str]:
        return []

    def _repr_html_(self) -> str:
        return render.card(self.title, self._summary(), self._body(), self.figures)

    def __repr__(self) -> str:
        lines = self._summary()
        return f"<{type(self).__name__}: {self.title}" + (f" · {lines[0]}" if lines else "") + ">"


class Overview(Result):
    """Query id, batches and watermarks, operators and stores (``statelens overview --json``)."""

    def __init__(self, info: Any) -> None:
        self.report = self.info = info
        self.title = f"Checkpoint {info.path}"

    def _data(self) -> Any:
        from statelens.analysis.checkpoint.overview import overview_dict

        return overview_dict(self.info)

    def to_arrow(self) -> pa.Table:
        bs = self.info.batches
        return pa.table(
            {
                "batch_id": pa.array([b.batch_id for b in bs], pa.int64()),
                "committed": pa.array([b.committed for b in bs], pa.bool_()),
                "watermark": pa.array([_utc(b.watermark_ms) for b in bs], pa.timestamp("ms", "UTC")),
                "watermark_ms": pa.array([b.watermark_ms for b in bs], pa.int64()),
                "timestamp": pa.array([_utc(b.timestamp_ms) for b in bs], pa.timestamp("ms", "UTC")),
                "partitions": pa.array([b.shuffle_partitions for b in bs], pa.int64()),
            }
        )

    def _summary(self) -> list[str]:
        from statelens.analysis.checkpoint.overview import repartition_lines

        info = self.info
        pending = f"; planned, not committed: {', '.join(map(str, info.uncommitted))}" if info.uncommitted else ""
        return [
            f"query {info.query_id} · {len(info.batches)} batches ({len(info.committed_batches)} committed, "
            f"last committed {info.last_committed}){pending} · provider {info.provider}",
            *repartition_lines(info),
        ]

    def _body(self) -> list[str]:
        ops = [
            [op.operator_id, op.operator_name, ", ".join(f"{s.store_name} ({s.num_partitions} partitions)" for s in op.stores)]
            for op in self.info.operators
        ]
        newest = self.to_arrow().to_pylist()[::-1]
        return [
            render.table(["operator", "kind", "stores"], ops) if ops else "<p>No stateful operators (no state/ folder).</p>",
            "<p><b>Batches, newest first</b></p>",
            render.table(list(newest[0]) if newest else [], [list(r.values()) for r in newest]),
        ]

    @property
    def figures(self) -> list[tuple[str, Any]]:
        from statelens.analysis.charts import charts

        return [("Watermark", charts.watermark_figure(self.info.batches))] if self.info.batches else []

    # the tables the app's overview shows

    def summary(self) -> dict[str, Any]:
        """Query id, batches, last committed, watermark, operators, provider, shuffle partitions, uncommitted."""
        from statelens.analysis.checkpoint.overview import summary

        return summary(self.info)

    def batches_table(self, tz: str = "UTC") -> pa.Table:
        """One row per batch: committed, watermark and timestamp in ``tz``, partitions."""
        from statelens.analysis.checkpoint.overview import batches_table

        return batches_table(self.info, tz)

    def conf_table(self) -> pa.Table:
        """The streaming configuration the query recorded in offsets/."""
        from statelens.analysis.checkpoint.overview import conf_table

        return conf_table(self.info)

    def operators_table(self, keys: dict[int, list[dict[str, Any]]], problems: dict[int, str] | None = None) -> pa.Table:
        """Every operator at a glance; ``keys``, ``problems``: ``Checkpoint.key_schemas()``."""
        from statelens.analysis.checkpoint.overview import operators_table

        return operators_table(self.info, keys, problems)

    def repartition_lines(self) -> list[str]:
        """Where the state was repartitioned between batches, one sentence each."""
        from statelens.analysis.checkpoint.overview import repartition_lines

        return repartition_lines(self.info)


class Doctor(Result):
    """Is the checkpoint whole, where a restart starts, what it reads and may change (``doctor --json``)."""

    def __init__(self, report: Any, restart_error: Any = None) -> None:
        self.report, self.restart_error = report, restart_error
        self.title = f"Checkpoint doctor: {report.path}"

    @property
    def ok(self) -> bool:
        return bool(self.report.ok)

    def _data(self) -> Any:
        return self.report.to_dict() | ({"restart_error": asdict(self.restart_error)} if self.restart_error else {})

    def to_arrow(self) -> pa.Table:
        ps = self.report.problems
        return pa.table(
            {
                "severity": pa.array([p.severity for p in ps], pa.string()),
                "code": pa.array([p.code for p in ps], pa.string()),
                "title": pa.array([p.title for p in ps], pa.string()),
                "meaning": pa.array([p.meaning for p in ps], pa.string()),
                "action": pa.array([p.action for p in ps], pa.string()),
            }
        )

    def _summary(self) -> list[str]:
        r = self.report
        c = r.committed
        return [
            f"{len(r.problems)} problem(s) · {len(c)} committed batches"
            + (f" ({c[0]}–{c[-1]})" if c else "")
            + f" · a restart runs batch {r.restart_batch} · checkpoint format version {r.checkpoint_format_version}",
            f"{r.checksums_verified} file(s) verified against their .crc sidecars",
        ]

    def _body(self) -> list[str]:
        out = [render.problems(self.report.problems)]
        e = self.restart_error
        if e is not None:
            items = "".join(f"<li>{render.esc(x)}</li>" for x in [*e.changes, *(f"way out: {w}" for w in e.ways_out)])
            out.append(
                f"<p><b>Why the restart failed: {render.esc(e.title)}</b> {render.esc(e.error_class or '')}</p><ul>{items}</ul>"
            )
        settings = [[s.setting, s.value, s.may_change] for s in self.report.restart_settings]
        out += ["<p><b>What a restart may change</b></p>", render.table(["setting", "value", "may change"], settings)]
        return out


class Progress(Result):
    """Per batch: what each source read, rows, durations, late rows (``progress --json``)."""

    title = "Progress"

    def __init__(
        self, info: Any, log: Any, rows: list[dict[str, Any]], notes: list[str], lags: list[Any], mismatch: str | None = None
    ) -> None:
        """``notes``: the event log's; ``mismatch``: why its operators do not match the checkpoint's."""
        self.report, self.info, self.log, self.rows, self.lags, self.mismatch = log, info, log, rows, lags, mismatch
        self.notes = notes + ([f"Operators could not be matched: {mismatch}."] if mismatch else [])
        self.title = f"Progress: {info.path}"

    def late_drops(self) -> list[Any]:
        """Per operator, the rows it dropped as late, by batch (from the event log)."""
        from statelens.analysis.runs.progress import late_drops

        return late_drops(self.log) if self.log else []

    def duplicate_drops(self) -> list[Any]:
        """Per dedup operator, the duplicate rows it dropped, by batch (from the event log)."""
        from statelens.analysis.runs.progress import duplicate_drops

        return duplicate_drops(self.log) if self.log else []

    def _data(self) -> Any:
        log = self.log
        return {
            "query_id": self.info.query_id,
            "progress": {"location": log.location, "format": log.format, "files": log.files} if log else None,
            "notes": self.notes,
            "batches": self.rows,
            "snapshot_lag": [x.to_dict() for x in self.lags],
        }

    def to_arrow(self) -> pa.Table:
        return pa.table(
            {
                "batch_id": pa.array([r["batch_id"] for r in self.rows], pa.int64()),
                "input_rows": pa.array([r["input_rows"] for r in self.rows], pa.int64()),
                "duration_ms": pa.array([r["duration_ms"] for r in self.rows], pa.int64()),
                "late_rows_dropped": pa.array(
                    [
                        sum(o["rows_dropped_by_watermark"] or 0 for o in r["operators"]) if r["has_progress"] else None
                        for r in self.rows
                    ],
                    pa.int64(),
                ),
                "duplicates_dropped": pa.array(
                    [
                        sum(int(o["custom_metrics"].get("numDroppedDuplicateRows") or 0) for o in r["operators"])
                        if r["has_progress"]
                        else None
                        for r in self.rows
                    ],
                    pa.int64(),
                ),
                "sources": pa.array(
                    ["; ".join(f"{s['label']}: {s['summary']}" for s in r["sources"]) for r in self.rows], pa.string()
                ),
            }
        )

    def _summary(self) -> list[str]:
        log = self.log
        where = (
            f"{log.format}: {log.location} ({len(log.batches)} batches)"
            if log
            else "none (give event_log= for rows, rates and late rows)"
        )
        return [f"progress {where}", *self.notes]

    def _body(self) -> list[str]:
        return [render.arrow_table(self.to_arrow())]

    @property
    def figures(self) -> list[tuple[str, Any]]:
        if self.log is None:
            return []
        from statelens.analysis.charts import charts

        return [
            ("Input per batch", charts.rates_figure(self.log)),
            ("Batch duration by phase", charts.durations_figure(self.log)),
            ("Late rows dropped by the watermark", charts.late_rows_figure(self.log)),
        ]


class KeyAnswer(Result):
    """Why one key is missing: what reached the output and the root cause first, then the flow
    (one element of ``why-missing --json``'s ``results``)."""

    def __init__(self, result: Any, report: Any) -> None:
        self.report, self.result = report, result
        self.title = f"Why is {result.key!r} missing?"

    @property
    def key(self) -> str:
        return str(self.result.key)

    @property
    def outcome(self) -> str | None:
        """What reached the output (the whole query's answer; None for one operator's verdict)."""
        return self.result.outcome if self.result.whole_query else None  # type: ignore[no-any-return]

    @property
    def cause(self) -> str | None:
        return self.result.cause if self.result.whole_query else None  # type: ignore[no-any-return]

    @property
    def verdict(self) -> str:
        return str(self.result.verdict)

    @property
    def headline(self) -> str:
        """The sentence a user reads first."""
        r = self.result
        return str(r.fate.headline if r.whole_query and r.fate.headline else r.explanation)

    def _data(self) -> Any:
        return self.result.to_dict()

    def to_arrow(self) -> pa.Table:
        return answers_table([self.result])

    def _summary(self) -> list[str]:
        return [self.headline]

    def _repr_html_(self) -> str:
        return render.card(self.title, [], [render.key_answer(self.result)], self.figures)

    @property
    def figures(self) -> list[tuple[str, Any]]:
        if self.result.whole_query or not self.result.timeline:
            return []
        from statelens.analysis.charts import charts

        return [(f"{self.key} against the watermark", charts.key_timeline_figure(self.result, self.report.watermarks))]


def answers_table(results: list[Any]) -> pa.Table:
    """One row per key: what reached the output, the root cause, where and when, the first sentence."""
    # (outcome, cause, where, verdict operator, first sentence): the whole query's; one operator's verdict has none
    whole = [
        (r.outcome, r.cause, r.cause_at or {}, r.verdict_operator, r.fate.headline or r.explanation)
        if r.whole_query
        else (None, None, {}, None, r.explanation)
        for r in results
    ]
    return pa.table(
        {
            "key": pa.array([r.key for r in results], pa.string()),
            "outcome": pa.array([w[0] for w in whole], pa.string()),
            "cause": pa.array([w[1] for w in whole], pa.string()),
            "cause_operator": pa.array([w[2].get("operator_id") for w in whole], pa.int64()),
            "cause_batch": pa.array([w[2].get("batch_id") for w in whole], pa.int64()),
            "verdict": pa.array([r.verdict for r in results], pa.string()),
            "verdict_operator": pa.array([w[3] for w in whole], pa.int64()),
            "answer": pa.array([w[4] for w in whole], pa.string()),
        }
    )


class Answers(list[KeyAnswer]):
    """``why_missing``'s answers, one per key in the order asked; the list as a whole is
    ``why-missing --json``. One operator's verdicts (``operator=``); the whole query's answer is
    ``QueryAnswers``."""

    def __init__(self, report: Any) -> None:
        super().__init__(KeyAnswer(r, report) for r in report.results)
        self.report = report

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self.report.to_dict())  # type: ignore[no-any-return]

    def to_arrow(self) -> pa.Table:
        return answers_table([a.result for a in self])

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()

    def heading(self) -> str:
        """What was asked and read, in one sentence (the CLI's first line, the notebook's, the page's)."""
        r = self.report
        if isinstance(self, QueryAnswers):
            s = r.input_search
            searched = (
                f"{s.files_searched:,} of {s.files_listed:,} input file(s) searched"
                + (" (" + ", ".join(f"{src}: {col}" for src, col in s.columns.items()) + ")" if s.columns else "")
                if s is not None and s.files_listed
                else "input not searched"
            )
            plan = f"plan from {r.plan_from}" if r.plan_from else "no event log: operators and watermarks from the checkpoint"
            return f"the whole query at batch {r.batch}: {searched}; {plan} (state read by {r.engine})"
        inferred = f" [inferred from {r.inferred_from}]" if r.inferred_from else ""
        return (
            f"operator {r.operator_id} ({r.operator_name}){inferred} at batch {r.batch}, key field {r.key_label} "
            f"(state read by {r.engine})"
        )

    def _repr_html_(self) -> str:
        r = self.report.operator_report
        head = self.heading()
        notes = [
            head[0].upper() + head[1:],
            *(f"read by Spark instead: the native reader does not read {n}" for n in r.engine_notes),
        ]
        if r.history_error:
            notes.append(f"history could not be read: {r.history_error}")
        body = [render.key_answer(a.result) + "<hr>" for a in self]
        figures = [f for a in self for f in a.figures]
        return render.card(f"Why are {len(self)} key(s) missing?", notes, body, figures)


class QueryAnswers(Answers):
    """The whole query's answers: per key what reached the output, the root cause of the rest and the
    flow of its records (``fate``), its operator's verdict below."""


class Unmatched(Result):
    """Keys that never matched (``unmatched --json``)."""

    def __init__(self, report: Any) -> None:
        self.report = report
        self.title = f"Unmatched keys: operator {report.operator_id} ({report.operator_name}) at batch {report.batch}"

    def to_arrow(self) -> pa.Table:
        ks = self.report.keys
        return pa.table(
            {
                self.report.key_name: pa.array([str(k.key) for k in ks], pa.string()),
                "verdict": pa.array([k.verdict for k in ks], pa.string()),
                "side": pa.array([k.side for k in ks], pa.string()),
                "batch": pa.array([k.batch for k in ks], pa.int64()),
                "detail": pa.array([k.detail for k in ks], pa.string()),
            }
        )

    def _summary(self) -> list[str]:
        counts = self.report.counts()
        span = f"history batches {self.report.history[0]}-{self.report.history[1]}" if self.report.history else "no history"
        return [
            (", ".join(f"{v}: {n:,}" for v, n in sorted(counts.items())) or "no unmatched keys")
            + f" · {span} · state read by {self.report.engine}",
            *self.report.notes,
        ]

    def _body(self) -> list[str]:
        return [render.arrow_table(self.to_arrow())]


class Skew(Result):
    """Rows and bytes per partition of one store, skew ratios, hot keys (``skew --json``)."""

    def __init__(self, report: Any) -> None:
        self.report = report
        self.title = f"Skew: operator {report.operator_id} {report.store_name} at batch {report.batch_id}"

    def to_arrow(self) -> pa.Table:
        from statelens.analysis.charts import charts

        return charts.skew_table(self.report)

    def _summary(self) -> list[str]:
        note = (
            [f"read by Spark instead: the native reader does not read {self.report.engine_note}"]
            if self.report.engine_note
            else []
        )
        return [f"{self.report.headline} · state read by {self.report.engine}", *note]

    def _body(self) -> list[str]:
        from statelens.analysis.checkpoint.health import key_json

        hot = [[key_json(k["key"]), k["rows"]] for k in self.report.top_keys[:10] if k["rows"] > 1]
        return [render.findings(self.report.findings), render.arrow_table(self.to_arrow())] + (
            [render.table(["hottest key", "rows"], hot)] if hot else []
        )

    @property
    def figures(self) -> list[tuple[str, Any]]:
        from statelens.analysis.charts import charts

        return [(self.title, charts.skew_figure(self.report))]


class Growth(Result):
    """Rows and bytes per batch from the change feed, with findings (``growth --json``)."""

    title = "Growth"

    def __init__(self, report: Any) -> None:
        self.report = report

    def to_arrow(self) -> pa.Table:
        from statelens.analysis.charts import charts

        return charts.growth_table(self.report.stores)

    def _summary(self) -> list[str]:
        note = (
            [f"read by Spark instead: the native reader does not read {self.report.engine_note}"]
            if self.report.engine_note
            else []
        )
        return [f"{len(self.report.stores)} store(s) · state read by {self.report.engine}", *note]

    def _body(self) -> list[str]:
        from statelens.analysis.checkpoint.health import human_bytes

        stores = []
        for g in self.report.stores:
            first, last = min(g.rows, default=None), max(g.rows, default=None)
            span = f"{first}–{last}" if first is not None else "-"
            now = g.rows.get(last, 0) if last is not None else 0
            stores.append(
                [
                    g.operator_id,
                    g.store_name,
                    span,
                    f"{now:,}",
                    human_bytes(g.bytes.get(last, 0)) if last is not None else "-",
                    g.method,
                ]
            )
        head = ["operator", "store", "batches", "rows in state at the last", "bytes on disk at the last", "measured from"]
        return [render.findings(self.report.findings), render.table(head, stores)]

    @property
    def figures(self) -> list[tuple[str, Any]]:
        from statelens.analysis.charts import charts

        return [("Growth", charts.growth_figure(self.report.stores))]


class Rows(Result):
    """Rows: a SQL query's result or a store's state (``sql --json``: columns, rows, engine)."""

    def __init__(
        self, table: pa.Table, title: str, engines: dict[str, str], truncated: bool = False, notes: list[str] | None = None
    ) -> None:
        self.report = self.table = table
        self.title, self.engines, self.truncated, self.notes = title, engines, truncated, notes or []
        self.batch: int | None = None  # the batch a SQL query read

    @property
    def engine(self) -> str | None:
        found = sorted(set(self.engines.values()))
        return "+".join(found) if found else None

    def _data(self) -> Any:
        rows = [list(r.values()) for r in self.table.to_pylist()]
        return {"columns": self.table.column_names, "rows": rows, "engine": self.engine, "engines": self.engines}

    def to_arrow(self) -> pa.Table:
        return self.table

    def to_duckdb(self) -> Any:
        """A DuckDB relation over the rows (in DuckDB's default connection), for more SQL."""
        import duckdb

        return duckdb.from_arrow(self.table)

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def _summary(self) -> list[str]:
        more = " (cut at the row limit: more rows exist)" if self.truncated else ""
        read = f", state read by {self.engine}" if self.engine else ""
        return [f"{self.table.num_rows:,} rows{more}{read}", *self.notes]

    def _body(self) -> list[str]:
        return [render.arrow_table(self.table)]


class StateFiles(list[Any]):
    """Every file under state/ (``analysis.core.model.StateFile``), and the tables made of them."""

    def __init__(self, info: Any, files: list[Any]) -> None:
        super().__init__(files)
        self.info = info

    def summary(self) -> pa.Table:
        """Files and bytes per operator and store."""
        from statelens.analysis.checkpoint.layout import store_files_summary

        return store_files_summary(self)

    def history(self, operator: int, store: str) -> pa.Table:
        """Per state version of a store (as on disk), its files of every partition, retained or purged."""
        from statelens.analysis.checkpoint.layout import version_history

        return version_history(self, self.info.batches, operator, store)

    def schema_files(self, operator: int) -> pa.Table:
        """An operator's state schema files."""
        from statelens.analysis.checkpoint.layout import schema_files

        return schema_files(self, operator)


class Listing(list[Any]):
    """Every checkpoint under a folder or prefix, one row each (``ls --json``: ``checkpoints``)."""

    def __init__(self, prefix: str, rows: list[Any], skipped: list[str] | None = None) -> None:
        super().__init__(rows)
        self.prefix = prefix
        self.skipped = list(skipped or [])  # links under the prefix leading outside what may be read: not followed

    def to_dict(self) -> dict[str, Any]:
        out = {"prefix": self.prefix, "checkpoints": [r.to_dict() for r in self]}
        if self.skipped:
            out["skipped_links"] = self.skipped
        return jsonable(out)  # type: ignore[no-any-return]

    def skipped_line(self) -> str | None:
        """The links the listing did not follow, in one line (None: none)."""
        if not self.skipped:
            return None
        shown = ", ".join(self.skipped[:5]) + (f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else "")
        return f"Skipped {len(self.skipped)} link(s) leading outside the folders that may be opened: {shown}."

    def to_arrow(self) -> pa.Table:
        rows = [{k: v for k, v in r.to_dict().items() if k not in ("trend", "findings", "operators")} for r in self]
        for r, d in zip(self, rows, strict=True):
            d["operators"] = ", ".join(r.operators)
            d["findings"] = "; ".join(r.findings)
        return pa.Table.from_pylist(rows) if rows else pa.table({"path": pa.array([], pa.string())})

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()

    def _repr_html_(self) -> str:
        from statelens.analysis.checkpoint.health import human_bytes

        rows = [
            [
                r.path,
                r.last_committed,
                r.uncommitted,
                ", ".join(r.operators),
                human_bytes(r.state_bytes),
                r.error or (f"{r.worst_severity}: {r.worst}" if r.worst else "ok"),
            ]
            for r in self
        ]
        body = [render.table(["checkpoint", "last batch", "behind", "operators", "state", "doctor"], rows)]
        skipped = self.skipped_line()
        return render.card(f"{len(self)} checkpoint(s) under {self.prefix}", [skipped] if skipped else [], body)


class Repartition(Result):
    """What repartitioning the state would do (``repartition --json``)."""

    def __init__(self, preview: Any) -> None:
        self.report = preview
        self.title = f"Repartition to {preview.partitions} partitions"

    def lines(self) -> list[str]:
        from statelens.analysis.checkpoint.repartition import lines

        return lines(self.report)

    def to_arrow(self) -> pa.Table:
        from statelens.analysis.charts import charts

        tables = [charts.repartition_table(self.report, s) for s in self.report.stores]
        return pa.concat_tables(tables) if tables else pa.table({})

    def _summary(self) -> list[str]:
        return self.lines()

    def _body(self) -> list[str]:
        return [render.arrow_table(self.to_arrow())]

    @property
    def figures(self) -> list[tuple[str, Any]]:
        from statelens.analysis.charts import charts

        return [(f"operator {s.operator_id} {s.store}", charts.repartition_figure(self.report, s)) for s in self.report.stores]


class Preflight(Result):
    """Whether a changed job restarts on the checkpoint, judged by Spark (``preflight --json``)."""

    def __init__(self, report: Any) -> None:
        self.report = report
        self.title = f"{'Restarts' if report.verdict == 'restarts' else 'Fails'}: {report.title}"

    @property
    def verdict(self) -> str:
        return str(self.report.verdict)

    def to_arrow(self) -> pa.Table:
        ws = self.report.warnings
        return pa.table(
            {"kind": pa.array([w.kind for w in ws], pa.string()), "detail": pa.array([w.detail for w in ws], pa.string())}
        )

    def _summary(self) -> list[str]:
        r = self.report
        return [
            f"error class {r.error_class}" if r.error_class else "Spark's checks passed",
            *(f"way out: {w}" for w in r.ways_out),
        ]

    def _body(self) -> list[str]:
        r = self.report
        out = [render.table(["what changed"], [[d["change"]] for d in r.differences])] if r.differences else []
        if r.warnings:
            out.append(render.arrow_table(self.to_arrow()))
        return out


class Rebuild(Result):
    """The state rebuilt for a changed job in a new checkpoint (``rebuild --json``)."""

    def __init__(self, report: Any) -> None:
        self.report = report
        self.title = f"Rebuilt {len(report.batches)} batches into {report.to}"

    @property
    def verdict(self) -> str:
        """What the changed job does on the new checkpoint, by Spark's checks: ``restarts`` or ``fails``."""
        return str(self.report.check.verdict)

    def to_arrow(self) -> pa.Table:
        ops = self.report.operators
        return pa.table(
            {
                name: pa.array([getattr(o, name) for o in ops], pa.int64())
                for name in ("operator_id", "old_rows", "old_keys", "new_rows", "new_keys")
            }
        )

    def _summary(self) -> list[str]:
        r = self.report
        return [
            f"{len(r.batches)} batches replayed in {r.seconds:.1f} s",
            f"the changed job on it: {r.check.verdict}" + (f" ({r.check.error_class})" if r.check.error_class else ""),
            *(f"next: {s}" for s in r.next_steps),
        ]

    def _body(self) -> list[str]:
        return [render.arrow_table(self.to_arrow())]


class Chart(Result):
    """One health chart and the data it draws (``export``): ``table`` (Arrow), ``figure`` (Plotly)."""

    def __init__(self, name: str, table: Any, figure: Any) -> None:
        self.name, self.table, self.figure = name, table, figure
        self.title = f"The {name} chart"

    def _data(self) -> Any:
        return {
            "chart": self.name,
            "columns": self.table.column_names,
            "rows": [list(r.values()) for r in self.table.to_pylist()],
        }

    def to_arrow(self) -> pa.Table:
        return self.table

    def to_bytes(self, fmt: str) -> bytes:
        """The chart as ``png``, ``svg`` or ``html``, or its data as ``csv``."""
        from statelens.analysis.charts.export import figure_bytes, to_csv_bytes

        return to_csv_bytes(self.table) if fmt == "csv" else figure_bytes(self.figure, fmt)

    @property
    def figures(self) -> list[tuple[str, Any]]:
        return [(self.name, self.figure)]


class Report(Result):
    """The one-file HTML health report (``report``): ``html``; its findings as ``to_dict()``."""

    def __init__(self, checkup: Any, answers: Any = None) -> None:
        self.report, self.answers = checkup, answers
        self.title = f"Health report of {checkup.info.path}"

    @property
    def html(self) -> str:
        from statelens.analysis.charts.report import checkup_report

        c = self.report
        return checkup_report(c.info, c.skews, c.growth.stores, c.findings, c.progress, c.doctor, self.answers)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.report.findings)

    def _data(self) -> Any:
        findings = self.report.findings
        return {"warnings": self.warnings, "notes": len(findings) - self.warnings, "findings": [f.to_dict() for f in findings]}

    def to_arrow(self) -> pa.Table:
        rows = self._data()["findings"]
        return pa.Table.from_pylist(rows) if rows else pa.table({})

    def _repr_html_(self) -> str:
        return self.html
