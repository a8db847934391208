"""Will the changed query restart on this checkpoint? Spark's own verdict, explained (pure).

``statelens preflight`` runs the changed job on a scratch copy of the checkpoint for the batch it
would run next (``spark_io.preflight``): Spark plans that batch with every check a restart makes
(operators against the operator metadata, each store's key and value schema against the stored
one, transformWithState's column families) and either runs it or raises. This module turns that
run into the answer: ``fails`` with Spark's error class, the operator and store, the stored and new
schema side by side; or ``restarts``, with warnings for what restarts but behaves otherwise than
the user expects, each comparing the new plan with what the checkpoint (or an event log of a
previous run) records of the old query.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from statelens.analysis.checkpoint.restart_error import explain
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.core.operator_kinds import JOIN
from statelens.analysis.plan.query_plan import QueryPlan

SHUFFLE = "spark.sql.shuffle.partitions"
# confs the checkpoint pins whose change the user may expect to apply
_PINNED_MEANING = {
    "spark.sql.streaming.stateStore.providerClass": "the state store provider",
    "spark.sql.streaming.stateStore.encodingFormat": "the state encoding",
    "spark.sql.streaming.aggregation.stateFormatVersion": "the aggregation state format",
    "spark.sql.streaming.join.stateFormatVersion": "the join state format",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "the flatMapGroupsWithState state format",
    "spark.sql.streaming.stateStore.compression.codec": "the state files' compression codec",
    "spark.sql.streaming.multipleWatermarkPolicy": "the policy over several watermarks",
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "RocksDB's format version",
}


@dataclass(frozen=True)
class Warning:
    kind: str
    detail: str


@dataclass
class Field:
    name: str
    type: str
    nullable: bool

    def text(self) -> str:
        return f"{self.name} {self.type}" + ("" if self.nullable else " NOT NULL")

    def readable(self) -> str:
        """As a user reads a schema: ``window struct<start: timestamp, end: timestamp>`` (``text``: Spark's
        own, ``window StructType(StructField(start,TimestampType,true),...)``)."""
        return f"{self.name} {readable_type(self.type)}" + ("" if self.nullable else " NOT NULL")


@dataclass
class Preflight:
    verdict: str  # restarts | fails
    error_class: str | None
    title: str
    batch: int  # the batch judged: the one the query runs next
    how: str  # "scratch copy"
    new_data: bool = False  # the batch read the sources' new data (else: the next batch without new data)
    input_rows: int | None = None  # rows it read, when it ran
    operator_id: int | None = None
    store: str | None = None
    column_family: str | None = None
    schema_part: str | None = None  # key | value: which schema the stored and new ones are
    stored_schema: list[Field] | None = None
    new_schema: list[Field] | None = None
    differences: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[Warning] = field(default_factory=list)
    ways_out: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)  # comparisons that could not be made, and why
    skipped_writes: list[str] = field(default_factory=list)  # the job's own writes, not made
    other_queries: list[str] = field(default_factory=list)  # the job's queries on other checkpoints, not started
    spark_version: str | None = None
    error: str | None = None  # Spark's message, first lines

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("stored_schema", "new_schema"):
            if d[k] is not None:
                d[k] = [{"name": f["name"], "type": f["type"], "nullable": f["nullable"]} for f in d[k]]
        return d


# --------------------------------------------------------------------------- schemas in Spark's text


def _balanced_end(text: str, start: int) -> int:
    """The index after the parenthesis that closes the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur:
        out.append(cur)
    return out


def struct_fields(struct: str) -> list[Field]:
    """``StructType(StructField(a,StringType,true),...)`` -> its top-level fields."""
    inner = struct[struct.index("(") + 1 : _balanced_end(struct, struct.index("(")) - 1] if "(" in struct else ""
    out = []
    for part in _split_top(inner):
        part = part.strip()
        if not part.startswith("StructField("):
            continue
        name, *rest = _split_top(part[len("StructField(") : -1])
        nullable = rest[-1].strip() == "true" if rest else True
        out.append(Field(name.strip(), ",".join(rest[:-1]).strip(), nullable))
    return out


_SCALA_ATOMIC = re.compile(r"^([A-Za-z]+)Type$")


def readable_type(scala: str) -> str:
    """Spark's Scala form of a type as a user reads it: ``StructType(StructField(start,TimestampType,true),...)``
    -> ``struct<start: timestamp, ...>``, ``ArrayType(StringType,true)`` -> ``array<string>``, ``LongType`` ->
    ``long``, ``DecimalType(10,2)`` -> ``decimal(10,2)``; anything else as it is."""
    t = scala.strip()
    head, _, rest = t.partition("(")
    args = _split_top(rest[: _balanced_end(t, len(head)) - len(head) - 2]) if rest else []
    if head == "StructType":
        return "struct<" + ", ".join(f"{f.name}: {readable_type(f.type)}" for f in struct_fields(t)) + ">"
    if head == "ArrayType" and args:
        return f"array<{readable_type(args[0])}>"
    if head == "MapType" and len(args) >= 2:
        return f"map<{readable_type(args[0])}, {readable_type(args[1])}>"
    if head == "DecimalType" and args:
        return f"decimal({','.join(a.strip() for a in args)})"
    if t == "TimestampNTZType":
        return "timestamp_ntz"
    m = _SCALA_ATOMIC.match(t)
    return m.group(1).lower() if m else t


_SCHEMAS = re.compile(r"Existing (key|value)_schema=(StructType\()")


def _schemas_of(text: str) -> tuple[str, list[Field], list[Field]] | None:
    m = _SCHEMAS.search(text)
    if not m:
        return None
    old_end = _balanced_end(text, m.end(2) - 1)
    old = text[m.start(2) : old_end]
    n = re.compile(rf"new {m.group(1)}_schema=(StructType\()").search(text, old_end)
    if not n:
        return None
    new = text[n.start(1) : _balanced_end(text, n.end(1) - 1)]
    return m.group(1), struct_fields(old), struct_fields(new)


def _family_of(stored: dict[int, dict[str, dict[str, Any]]], op_id: int | None, part: str, fields: list[Field]) -> str | None:
    """The one column family (transformWithState variable) whose stored key or value schema this is."""
    want = [(f.name, f.type) for f in fields]
    found = [
        name
        for name, fam in stored.get(op_id if op_id is not None else -1, {}).items()
        if not name.startswith("$") and [(str(x.get("name")), _spark_type(x.get("type"))) for x in fam[part]] == want
    ]
    return found[0] if len(found) == 1 else None


def _spark_type(t: Any) -> str:
    """A schema file's type as Spark's error text writes it: "long" -> LongType."""
    simple = {"long": "LongType", "integer": "IntegerType", "string": "StringType", "double": "DoubleType", "float": "FloatType",
              "boolean": "BooleanType", "timestamp": "TimestampType", "date": "DateType", "short": "ShortType", "byte": "ByteType", "binary": "BinaryType"}  # fmt: skip
    return simple.get(t, str(t)) if isinstance(t, str) else str(t)


def named_once(items: list[str]) -> list[str]:
    """Each item once, in the order first met, with how often it came (a job writing the same file in
    a loop: ``DataFrameWriter.parquet(/out/x) (3 times)``, not the same file three times over)."""
    counts = Counter(items)
    return [f"{item} ({counts[item]} times)" if counts[item] > 1 else item for item in dict.fromkeys(items)]


def field_differences(stored: list[Field], new: list[Field]) -> list[dict[str, Any]]:
    """Position by position, as Spark compares them: each field that differs, marked."""
    out = []
    for i in range(max(len(stored), len(new))):
        s = stored[i] if i < len(stored) else None
        n = new[i] if i < len(new) else None
        if s and n and (s.name, s.type, s.nullable) == (n.name, n.type, n.nullable):
            continue
        if s is None:
            change = "added"
        elif n is None:
            change = "removed"
        elif s.type != n.type:
            change = "type changed"
        elif s.name != n.name:
            change = "renamed"
        else:
            change = "nullability changed"
        out.append({"position": i, "change": change, "stored": s.text() if s else None, "new": n.text() if n else None})
    return out


def _family(text: str) -> str | None:
    m = re.search(r"column family (?:name )?[`'\"]?([A-Za-z_$][\w$-]*)", text, re.I) or re.search(
        r"colFamilyName[=:]\s*[`'\"]?([A-Za-z_$][\w$-]*)", text
    )
    return m.group(1) if m else None


# --------------------------------------------------------------------------- warnings


def conf_warnings(info: CheckpointInfo, job_confs: dict[str, str]) -> list[Warning]:
    """The confs the job sets that the checkpoint pins: Spark keeps the checkpoint's."""
    out = []
    for key, value in sorted(job_confs.items()):
        kept = info.conf.get(key)
        if kept is None or str(value) == str(kept):
            continue
        if key == SHUFFLE:
            out.append(
                Warning(
                    "shuffle_partitions_ignored",
                    f"The job sets {SHUFFLE}={value}; the checkpoint keeps {kept}: the state stays in {kept} partitions "
                    f"and the stateful operators keep running {kept} tasks. To change it, repartition the state "
                    f"offline first (statelens repartition --partitions {value}).",
                )
            )
        else:
            what = _PINNED_MEANING.get(key, key)
            out.append(
                Warning(
                    "conf_ignored",
                    f"The job sets {key}={value}; the checkpoint keeps {kept} ({what}): Spark restarts with {kept}.",
                )
            )
    return out


def _ms(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


_WINDOWS_KEPT = (
    "The stored windows keep their old bounds: they are updated, emitted and evicted as they are; "
    "new rows go to windows of the new size beside them."
)


def _windows(plan: QueryPlan) -> dict[int, tuple[int, int, bool]]:
    """Operator -> its window's (size, slide, session) in ms."""
    out = {}
    for op in plan.operators.values():
        for c in op.keys:
            if c.window is not None:
                out[op.operator_id] = (c.window.size_ms, c.window.slide_ms, c.window.session)
    return out


def _join_bound(condition: str | None) -> str:
    return re.sub(r"#\d+L?(?:-T\d+ms)?", "", condition or "").strip()


def plan_warnings(
    keys: dict[int, list[dict[str, Any]]],
    new: QueryPlan | None,
    old: QueryPlan | None,
    stored_widths: dict[int, list[int]],
) -> tuple[list[Warning], list[str]]:
    """What the new plan changes against the old one (an event log's), or against what the stored
    state shows (its windows' widths, its key fields' names). Returns warnings and what could not
    be compared."""
    warnings: list[Warning] = []
    not_checked: list[str] = []
    if new is None:
        return [], ["the new query's plan: Spark gave none (Spark Connect, or the batch failed before planning)"]
    # key fields renamed: Spark compares state fields by position
    for op_id, op in new.operators.items():
        names = [c.name for c in op.keys]
        kept = [f.get("name") for f in keys.get(op_id, [])]
        if op.kind == JOIN or not kept or len(kept) != len(names):
            continue
        renamed = [f"{a} -> {b}" for a, b in zip(kept, names, strict=True) if a != b and a and b]
        if renamed:
            warnings.append(
                Warning(
                    "key_renamed",
                    f"Operator {op_id} ({op.kind}): key field {', '.join(renamed)}. Spark matches state fields by "
                    "position: the stored keys are read as the new ones, their values unchanged.",
                )
            )
    new_windows = _windows(new)
    old_windows = _windows(old) if old else {}
    for op_id, (size, slide, session) in new_windows.items():
        if op_id in old_windows and old_windows[op_id] != (size, slide, session):
            was = old_windows[op_id]
            warnings.append(
                Warning(
                    "window_changed",
                    f"Operator {op_id}: the window was {_ms(was[0])}"
                    + (f" sliding every {_ms(was[1])}" if was[1] != was[0] else "")
                    + f", now {_ms(size)}"
                    + (f" sliding every {_ms(slide)}" if slide != size else "")
                    + f". {_WINDOWS_KEPT}",
                )
            )
        elif op_id not in old_windows and not session and stored_widths.get(op_id):
            widths = stored_widths[op_id]
            if any(w != size for w in widths):
                warnings.append(
                    Warning(
                        "window_changed",
                        f"Operator {op_id}: the stored state holds windows of {', '.join(_ms(w) for w in widths)}; the "
                        f"changed query makes windows of {_ms(size)}. {_WINDOWS_KEPT}",
                    )
                )
    if old is None:
        not_checked.append(
            "a join's type and condition, and the filters before each stateful operator: the checkpoint does not "
            "record the old query's plan (give --event-log of a run of the deployed query); the watermark delay is "
            "compared with what the stored state shows"
        )
        return warnings, not_checked
    for column, delay in sorted(new.watermark_delays.items()):
        before_ms = old.watermark_delays.get(column)
        if before_ms is not None and before_ms != delay:
            later = "later" if delay > before_ms else "earlier"
            warnings.append(
                Warning(
                    "watermark_delay_changed",
                    f"The watermark on {column} was {_ms(before_ms)} behind the newest event time, now {_ms(delay)}: rows are "
                    f"late, and state is evicted and emitted, {_ms(abs(delay - before_ms))} {later} than before.",
                )
            )
    for op_id, op in new.operators.items():
        before = old.operators.get(op_id)
        if before is None or op.join is None or before.join is None:
            continue
        if op.join.join_type != before.join.join_type:
            warnings.append(
                Warning(
                    "join_type_changed",
                    f"Operator {op_id}: the join was {before.join.plan_join_type}, now {op.join.plan_join_type}. The "
                    "stored rows are joined under the new type: rows that age out unmatched are now "
                    + ("emitted with nulls." if "Outer" in op.join.plan_join_type else "dropped without output."),
                )
            )
        if _join_bound(op.join.condition) != _join_bound(before.join.condition):
            warnings.append(
                Warning(
                    "join_condition_changed",
                    f"Operator {op_id}: the join condition was {_join_bound(before.join.condition) or 'the keys only'}, now "
                    f"{_join_bound(op.join.condition) or 'the keys only'}. The stored rows are kept and evicted by the new bound.",
                )
            )
    for op_id, op in new.operators.items():
        before = old.operators.get(op_id)
        if before is None:
            continue
        now = {_join_bound(c) for conds in op.filters.values() for c in conds}
        earlier = {_join_bound(c) for conds in before.filters.values() for c in conds}
        added = sorted(now - earlier)
        if added:
            warnings.append(
                Warning(
                    "filter_added",
                    f"Operator {op_id} ({op.kind}): a filter added before it: {'; '.join(added)}. Rows it drops never reach "
                    "the state; the stored state still holds such rows and keeps emitting and evicting them.",
                )
            )
    return warnings, not_checked


def delay_from_state(info: CheckpointInfo, new: QueryPlan, newest: dict[int, tuple[int, int]]) -> list[Warning]:
    """Without the old plan: the deployed query's watermark delay from the checkpoint itself. Its
    watermark is the newest event time it saw less the delay, and that newest row is still in state
    (later than the watermark, it is not evicted): ``newest`` bounds it per operator ([lo, hi), ms).
    The new delay outside ``[lo - watermark, hi - watermark)`` changed."""
    committed = info.committed_batches
    if len(new.watermark_delays) != 1 or not committed or not newest:
        return []
    column, delay = next(iter(new.watermark_delays.items()))
    watermark = committed[-1].next_watermark_ms or committed[-1].watermark_ms
    if not watermark:
        return []
    lo = max(b[0] for b in newest.values()) - watermark
    hi = max(b[1] for b in newest.values()) - watermark
    if lo <= delay < hi or lo < 0:
        return []
    was = f"{_ms(lo)}" if hi - lo <= 1 else f"between {_ms(lo)} and {_ms(hi)}"
    later = "later" if delay > lo else "earlier"
    return [
        Warning(
            "watermark_delay_changed",
            f"The watermark on {column} was {was} behind the newest event time in the state (the checkpoint's "
            f"watermark against its newest stored row), now {_ms(delay)}: rows are late, and state is evicted and "
            f"emitted, {later} than before.",
        )
    ]


def sink_warnings(sink: dict[str, Any], stored: list[tuple[str, str]] | None, new: list[tuple[str, str]]) -> list[Warning]:
    """The job's file sink against the changed query's output: ``stored`` (name, type) of the newest file
    already in the sink's folder (partition columns left out), ``new`` the changed query's columns (the
    same left out). Spark restarts either way and writes the new columns into the same folder."""
    same_names = stored is not None and [n for n, _ in stored] == [n for n, _ in new]
    if (
        stored is None
        or not new
        or (same_names and all(a == b or "?" in (a, b) for (_, a), (_, b) in zip(stored, new, strict=True)))
    ):
        return []
    names = {n for n, _ in stored}
    added = [n for n, _ in new if n not in names]
    gone = [n for n, _ in stored if n not in {m for m, _ in new}]
    retyped = [f"{n} {a} -> {b}" for (n, a) in stored for (m, b) in new if n == m and a != b and "?" not in (a, b)]
    parts = [f"{', '.join(added)} added"] if added else []
    parts += [f"{', '.join(gone)} gone"] if gone else []
    parts += [f"{', '.join(retyped)}"] if retyped else []
    return [
        Warning(
            "sink_schema_changed",
            f"The job's {sink.get('format') or 'file'} sink {sink.get('path')} holds files with the columns "
            f"{', '.join(f'{n} {t}' for n, t in stored)}; the changed query writes {', '.join(f'{n} {t}' for n, t in new)} "
            f"({'; '.join(parts) or 'a new order'}). Spark restarts and writes them into the same folder: its readers "
            "meet two schemas. Write the changed job's output to a new folder whose _spark_metadata log holds an entry for "
            "every earlier batch (Spark's file sink log fails at its next compaction without them: `statelens rebuild "
            "--sink-to` prepares one), or migrate the old files.",
        )
    ]


def _names(fields: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(str(f.get("name")), str(f.get("type"))) for f in fields]


def family_warnings(
    stored: dict[int, dict[str, dict[str, Any]]], new: dict[int, dict[str, dict[str, Any]]], avro: bool
) -> list[Warning]:
    """transformWithState's variables after the changed query ran (the schema files Spark wrote in the
    scratch copy) against the stored ones: a variable added starts empty for every stored key; a
    value field added or renamed under Avro encoding reads as null in the values stored before."""
    out = []
    for op_id, families in sorted(new.items()):
        before = stored.get(op_id, {})
        for name, fam in sorted(families.items()):
            if name.startswith("$") or name == "default":
                continue
            if name not in before:
                out.append(
                    Warning(
                        "state_variable_added",
                        f"Operator {op_id}: state variable {name} is new: it starts empty for every key the state holds.",
                    )
                )
                continue
            old_fields, new_fields = _names(before[name]["value"]), _names(fam["value"])
            if old_fields == new_fields:
                continue
            added = [n for n, _ in new_fields if n not in dict(old_fields)]
            removed = [n for n, _ in old_fields if n not in dict(new_fields)]
            detail = f"Operator {op_id}: the value of state variable {name} evolved ({', '.join(f'{n} {t}' for n, t in old_fields)} -> {', '.join(f'{n} {t}' for n, t in new_fields)})"
            if avro or fam.get("avro"):
                detail += (
                    ". Avro reads the values stored before with the new schema: "
                    + (f"{', '.join(added)} read as null" if added else "")
                    + ("; " if added and removed else "")
                    + (f"{', '.join(removed)} no longer read (a renamed field loses its values)" if removed else "")
                    + ". Code that reads them must handle null."
                )
            out.append(Warning("state_schema_evolved", detail + ("" if detail.endswith(".") else ".")))
    return out


# --------------------------------------------------------------------------- the verdict


def judge(
    info: CheckpointInfo,
    run: dict[str, Any],
    keys: dict[int, list[dict[str, Any]]],
    batch: int,
    new_plan: QueryPlan | None,
    old_plan: QueryPlan | None = None,
    stored_widths: dict[int, list[int]] | None = None,
    state_size: dict[int, tuple[int, int]] | None = None,
    newest: dict[int, tuple[int, int]] | None = None,
    families: tuple[dict[int, dict[str, dict[str, Any]]], dict[int, dict[str, dict[str, Any]]] | None] | None = None,
) -> Preflight:
    """``run``: what the job's process reported (``spark_io.preflight.redirect``); ``keys``: each
    operator's stored key fields. ``state_size``: operator -> (rows, keys) at the last batch, for
    what a new checkpoint loses."""
    error = run.get("error")
    progress = run.get("progress") or []
    common: dict[str, Any] = {
        "batch": progress[0]["batchId"] if progress else batch,
        "how": "scratch copy",
        "new_data": bool(run.get("new_data")),
        "input_rows": progress[0]["numInputRows"] if progress else None,
        "skipped_writes": named_once(run.get("skipped_writes") or []),
        "other_queries": named_once(run.get("other_queries") or []),
        "spark_version": run.get("spark_version"),
    }
    warnings = conf_warnings(info, run.get("confs") or {})
    plan_w, not_checked = plan_warnings(keys, new_plan, old_plan, stored_widths or {})
    not_checked += [f"whether the job sets {c}: the job's session did not answer" for c in run.get("confs_unread") or []]
    if old_plan is None and new_plan is not None:
        plan_w += delay_from_state(info, new_plan, newest or {})
    if families is not None and families[1] is not None:
        avro = info.conf.get("spark.sql.streaming.stateStore.encodingFormat") == "avro"
        plan_w += family_warnings(families[0], families[1], avro)
    if not error:
        return Preflight(
            "restarts",
            None,
            f"The changed query restarts on this checkpoint: Spark ran batch {common['batch']} "
            + (f"({common['input_rows']:,} new input rows) " if run.get("new_data") and progress else "(no new data) ")
            + "on a scratch copy with every restart check.",
            warnings=warnings + plan_w,
            not_checked=not_checked,
            **common,
        )
    e = explain(error, info, keys)
    cls = e.error_class or run.get("error_class")  # the cause, not the STREAM_FAILED around it
    result = Preflight(
        "fails",
        cls,
        e.title,
        operator_id=e.operator_id,
        differences=[{"change": c} for c in e.changes],
        ways_out=list(e.ways_out),
        warnings=warnings,
        not_checked=["the other changes: Spark stops at the first check that fails"],
        error="\n".join(error.strip().splitlines()[:6])[:2000],
        **common,
    )
    schemas = _schemas_of(error)
    if schemas:
        part, stored, new = schemas
        result.schema_part, result.stored_schema, result.new_schema = part, stored, new
        result.differences = field_differences(stored, new)
        result.column_family = _family(error) or _family_of(families[0] if families else {}, result.operator_id, part, stored)
        if result.column_family:
            result.title = f"The {part} schema of state variable {result.column_family} (operator {result.operator_id}) changed"
        op = next((o for o in info.operators if o.operator_id == result.operator_id), None)
        if op is not None:
            if result.column_family and op.store(result.column_family):
                result.store = result.column_family
            elif len(op.stores) == 1:
                result.store = op.stores[0].store_name
    if state_size and result.operator_id is not None and result.operator_id in state_size:
        _, n_keys = state_size[result.operator_id]
        total = sum(r for r, _ in state_size.values())
        unread = [str(o.operator_id) for o in info.operators if o.operator_id not in state_size]
        rows = f"{total:,} rows" if not unread else f"{total:,} rows and operator {', '.join(unread)}'s, not counted here"
        result.ways_out = [
            w
            if "new checkpoint" not in w
            else w.rstrip(".")
            + f": the state of batch {info.last_committed} is lost ({rows}; {n_keys:,} keys in operator {result.operator_id})."
            for w in result.ways_out
        ]
    return result
