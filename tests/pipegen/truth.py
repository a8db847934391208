"""Each designed key's truth, from what Spark did and nothing else:

* which batch read each input file: the checkpoint's file-source log (``sources/<n>/<batch>``);
* which records the filters and the static join keep, and the group each record falls in: Spark's
  own evaluation of the query's stateless part, as a batch query over the same files;
* which records reached the output: the sink's files, each listed in ``_spark_metadata`` by the batch
  that wrote it (a foreachBatch sink: in the batch's own folder, ``batch=N``); a record is in a row by
  its id (``rid``), or by its power of two in a sum;
* which records still wait: Spark's ``statestore`` reader of every operator at the last batch;
* which batch an operator dropped rows as late or as duplicates in: Spark's progress.

The design of a record (late, filtered, a duplicate, no match...) only says which of these facts
to look at for a record that did not reach the output; when the facts do not bear it out, the key's
truth is ``undetermined`` (the generator's mistake, reported as such, never scored).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipegen.build import group_column, prefix
from pipegen.spec import Pipeline, group_of

WRITTEN, PARTLY, UNMATCHED, WAITING, LOST, NEVER, UNDETERMINED = (
    "written",
    "partly_written",
    "written_unmatched",
    "waiting",
    "lost",
    "never_in_input",
    "undetermined",
)
BITS = ("sum", "bit_or")  # an aggregation buffer's fields holding the records' powers of two
PRESERVED = {"left_outer": ("left",), "right_outer": ("right",), "full_outer": ("left", "right")}
DEDUP_NAMES = {"plain": "dedupe", "with_time": "dedupe", "within": "dedupeWithinWatermark"}


@dataclass
class Record:
    rid: str
    source: str
    side: str
    file: str
    row: int  # 1-based, as the file holds it
    batch: int | None  # the batch that read its file (Spark's file-source log)
    values: dict[str, Any]  # by role
    intent: str
    group: Any = None  # its value of the last operator's key (Spark's evaluation)
    passed_filters: bool = True
    passed: bool = True  # reached the first stateful operator (filters and static join)

    def where(self) -> str:
        return f"{self.source}/{self.file} row {self.row} (batch {self.batch})"


@dataclass
class Cause:
    kind: str
    operator: int | None
    batch: int | None
    record: Record | None = None
    note: str = ""

    def at(self) -> tuple[str, int | None, int | None]:
        return (self.kind, self.operator, self.batch)


@dataclass
class Fate:
    record: Record
    state: str  # reached | waiting | lost | undetermined
    padded: bool = False
    cause: Cause | None = None
    operator: int | None = None  # waiting: the operator nearest the output holding it
    batches: list[int] = field(default_factory=list)  # reached: the batches that wrote it


@dataclass
class KeyTruth:
    key: str
    ask: str | None
    design: str
    outcome: str
    cause: Cause | None
    causes: list[Cause]  # every cause a lost record of the key had (any is an answer)
    fates: list[Fate]
    why: str = ""  # undetermined: what did not bear the design out
    near: KeyTruth | None = None  # the look-alike written, as a key of its own
    unread: list[str] = field(default_factory=list)  # files holding the key that no batch read (source/name)
    in_sink: bool = False  # some column of the sink's rows holds the key as it is
    # causes as true without the plan, which alone tells what a join's row waits for (an outer join
    # emits it at the watermark; another waits for a match): the join's reason it is unmatched
    unplanned: list[Cause] = field(default_factory=list)

    def summary(self) -> str:
        c = self.cause
        at = f" at operator {c.operator}, batch {c.batch}" if c else ""
        return f"{self.outcome}" + (f", {c.kind}{at}" if c else "")


class Truth:
    """What Spark did with one pipeline's records (one Spark session's reads)."""

    def __init__(self, spark: Any, folder: Path) -> None:
        self.folder = folder
        self.p = Pipeline.load(folder)
        self.progress = {x["batchId"]: x["stateOperators"] for x in json.loads((folder / "progress.json").read_text())}
        self.last = max(self.progress)
        self.ops = self._operators()
        self.records = self._records()
        self._evaluate(spark)
        self.sink = self._sink()
        self.held = self._held(spark)

    # ---- operators: Spark numbers them from the sink (the last is 0)

    def _operators(self) -> dict[str, list[tuple[int, str]]]:
        """Per side ("" without a join): the path's operators from the source, (Spark's id, kind)."""
        p = self.p
        names = [o["operatorName"] for o in self.progress[self.last]]
        if p.join:
            after = [(0, "window")] if p.window else []
            j = len(after)
            paths = {}
            for s in p.sources:
                dd = [(j + 1, "dedup")] if p.dedup and p.dedup["side"] == s.side else []
                paths[s.side] = [*dd, (j, "join"), *after]
        else:
            kinds = (["dedup"] if p.dedup else []) + (["window"] if p.window else []) + (["window"] if p.rollup else [])
            kinds += ["function"] if p.function else []
            paths = {"": [(len(kinds) - 1 - i, k) for i, k in enumerate(kinds)]}
        n_ops = len({op for path in paths.values() for op, _ in path})
        if n_ops != len(names):
            raise ValueError(f"{p.name}: the design has {n_ops} stateful operators, Spark's progress {len(names)}: {names}")
        for path in paths.values():
            for op, kind in path:
                if kind == "dedup" and p.dedup and names[op] != DEDUP_NAMES[p.dedup["kind"]]:
                    raise ValueError(f"{p.name}: operator {op} is {names[op]}, the design's dedup")
                if kind == "join" and names[op] != "symmetricHashJoin":
                    raise ValueError(f"{p.name}: operator {op} is {names[op]}, the design's join")
        return paths

    def path(self, r: Record) -> list[tuple[int, str]]:
        return self.ops[r.side]

    def op_of(self, kind: str, side: str = "") -> int | None:
        return next((op for op, k in self.ops[side if self.p.join else ""] if k == kind), None)

    def dropped(self, op: int, batch: int | None, metric: str) -> int:
        if batch is None or batch not in self.progress or op >= len(self.progress[batch]):
            return 0
        o = self.progress[batch][op]
        return int(o.get(metric, o.get("customMetrics", {}).get(metric, 0)) or 0)

    # ---- records: the input files, and the batch Spark's file source read each in

    def _records(self) -> list[Record]:
        p, cp = self.p, self.folder / "checkpoint"
        read_in: dict[tuple[str, str], int] = {}
        for log in (cp / "sources").glob("*/[0-9]*"):
            batch_of = self._query_batches(int(log.parent.name))
            for line in log.read_text().splitlines()[1:]:
                entry = json.loads(line)
                parts = entry["path"].rsplit("/", 2)
                read_in[(parts[-2], parts[-1])] = batch_of[entry["batchId"]]
        out = []
        for b, batch in enumerate(p.batches):
            for s in p.sources:
                role_of = {c: r for r, c in s.cols.items()}
                for name, _, rows in p.files(b, s, batch.get(s.name, [])):
                    for i, row in enumerate(rows, 1):
                        values = {role_of[c]: v for c, v in row.items() if c in role_of}
                        values["key"] = _norm(values.get("key"))  # a number key as the user types it
                        batch_id = read_in.get((s.name, name))
                        out.append(Record(row["rid"], s.name, s.side, name, i, batch_id, values, row["_intent"]))
        return out

    def _query_batches(self, source: int) -> dict[int, int]:
        """A file source's own log ids -> the query batch that read each: the first whose offset (in the
        checkpoint's ``offsets/<batch>``, the source's ``logOffset``) reached it. They part ways after a
        batch that read no file (a restart's first batch, the batch run for the watermark alone)."""
        out: dict[int, int] = {}
        offsets = self.folder / "checkpoint" / "offsets"
        for b in sorted(int(f.name) for f in offsets.iterdir() if f.name.isdigit()):
            lines = (offsets / str(b)).read_text().splitlines()
            value = json.loads(lines[2 + source]) if len(lines) > 2 + source and lines[2 + source] != "-" else None
            if isinstance(value, dict) and "logOffset" in value:
                out.setdefault(int(value["logOffset"]), b)
        return out

    def _evaluate(self, spark: Any) -> None:
        """Spark's stateless part over the inputs: which records pass the filters, the static join, and their group."""
        p = self.p
        by_rid = {r.rid: r for r in self.records}
        group = group_column(p)
        kept = {
            side: {row["rid"] for row in df.select("rid").collect()}
            for side, df in prefix(spark, p, self.folder, False, []).items()
        }
        filtered = kept
        if p.static:
            filtered = {
                s: {row["rid"] for row in df.select("rid").collect()}
                for s, df in prefix(spark, p, self.folder, False, [], static=False).items()
            }
            unfiltered = prefix(spark, p, self.folder, False, [], filters=False)[""]
            for row in unfiltered.select("rid", group).collect():
                by_rid[row["rid"]].group = row[group]
        for r in self.records:
            r.passed_filters = r.rid in filtered[r.side]
            r.passed = r.rid in kept[r.side]
            if not (p.static and p.static.adds):
                r.group = group_of(p, r.values.get("key"))

    # ---- the sink: each file by the batch that wrote it

    def _sink(self) -> dict[str, list[tuple[int, bool]]]:
        """rid -> (batch, null-padded) of every sink row it is in."""
        p, sink = self.p, self.folder / "sink"
        written: dict[str, int] = {}  # a file under sink/ -> the batch that wrote it
        if p.sink_kind == "foreach":  # the function's own folders: sink/batch=N/
            for folder in sink.glob("batch=*"):
                for f in folder.glob(f"part-*.{p.sink_fmt}"):
                    written[f"{folder.name}/{f.name}"] = int(folder.name.split("=")[1])
        else:
            for log in (sink / "_spark_metadata").iterdir():
                if log.name.split(".")[0].isdigit():
                    for line in log.read_text().splitlines()[1:]:
                        written.setdefault(json.loads(line)["path"].rsplit("/", 1)[-1], int(log.name.split(".")[0]))
        out: dict[str, list[tuple[int, bool]]] = {}
        self.sink_values: set[str] = set()
        by_group: dict[Any, list[Record]] = {}
        for r in self.records:
            by_group.setdefault(r.group, []).append(r)
        group = group_column(p)
        keyed = {group, *(s.cols["key"] for s in p.sources), *p.rename.values()}  # the columns a number key is in
        left, right = (p.sources[0].name, p.sources[1].name) if p.join else ("", "")
        for name, batch in written.items():
            for row in _read(sink / name, p.sink_fmt):
                self.sink_values |= {v for v in row.values() if isinstance(v, str)}
                self.sink_values |= {str(v) for c, v in row.items() if c in keyed and isinstance(v, int)}
                found: list[tuple[str, bool]] = []
                if "rids" in row:
                    found = [(x, False) for x in (row["rids"] or "").split(",") if x]
                elif "rid" in row:
                    found = [(row["rid"], False)]
                elif f"{left}_rid" in row or f"{right}_rid" in row:  # a JSON sink leaves a null column out
                    lr, rr = row.get(f"{left}_rid"), row.get(f"{right}_rid")
                    found = [(x, lr is None or rr is None) for x in (lr, rr) if x]
                else:
                    sums = {c: _int(row.get(c)) for c in ("total", "left_total", "right_total", "unmatched_total")}
                    unmatched = sums.pop("unmatched_total") or 0
                    for r in by_group.get(_norm(row.get(group)), []):
                        n = _int(r.values.get("num")) or 0
                        if n > 0 and any(v is not None and v & n for v in sums.values()):
                            found.append((r.rid, bool(unmatched & n)))
                for rid, padded in found:
                    out.setdefault(rid, []).append((batch, padded))
        return out

    # ---- what every operator's state holds at the last batch (Spark's reader)

    def _held(self, spark: Any) -> dict[str, int]:
        """rid -> the operator nearest the output whose state holds it at the last batch. A pipeline
        moved from where it ran (the committed ones) is read where its transformWithState metadata
        finds its schema files (``read_location``: the same files, the recorded paths moved)."""
        from statelens.spark_io.logs.overlay import read_location

        p, cp = self.p, read_location(str(self.folder / "checkpoint"))
        reads: list[tuple[int, dict[str, str]]] = []
        for op, kind in {x for path in self.ops.values() for x in path}:
            if kind == "join":
                reads += [(op, {"joinSide": side}) for side in ("left", "right")]
            elif kind == "function" and p.function and p.function["kind"].startswith("tws"):
                reads.append((op, {"stateVarName": "ids"}))
            elif kind != "dedup":
                reads.append((op, {}))
        held: dict[str, int] = {}
        by_group: dict[Any, list[Record]] = {}  # by the last operator's group, and by the join key (a join's state)
        for r in self.records:
            for g in {r.group, r.values.get("key") if p.join else r.group}:
                by_group.setdefault(g, []).append(r)
        for op, opts in sorted(reads, key=lambda x: -x[0]):
            reader = spark.read.format("statestore").option("operatorId", op).option("batchId", self.last)
            for k, v in opts.items():
                reader = reader.option(k, v)
            for row in reader.load(cp).collect():
                for rid in _rids_in(row, by_group):
                    held[rid] = op  # the nearest the output last
        return held

    # ---- fates

    def fate(self, r: Record, records: list[Record]) -> Fate:
        if r.rid in self.sink:
            rows = self.sink[r.rid]
            padded = all(pad for _, pad in rows)
            f = Fate(r, "reached", padded, batches=sorted({b for b, _ in rows}))
            if padded:
                f.cause = self.join_cause(r, records)
            return f
        if r.rid in self.held:
            return Fate(r, "waiting", operator=self.held[r.rid])
        return self.lost(r, records)

    def lost(self, r: Record, records: list[Record]) -> Fate:
        path = self.path(r)
        first = path[0][0] if path else None
        if not r.passed_filters:
            return Fate(r, "lost", cause=Cause("filtered", first, r.batch, r))
        if not r.passed:
            assert self.p.static is not None
            st = self.p.static  # an anti join removes a row the table holds: a filter; another join found no row
            kind = "filtered" if st.kind == "left_anti" else "no_match_in_input"
            return Fate(r, "lost", cause=Cause(kind, first, r.batch, r, f"static:{st.name}"))
        late = next((op for op, _ in path if self.dropped(op, r.batch, "numRowsDroppedByWatermark")), None)
        if r.intent == "late":
            if late is None:
                return Fate(
                    r, "undetermined", cause=Cause("undetermined", None, r.batch, r, "designed late, no drop in its batch")
                )
            return Fate(r, "lost", cause=Cause("dropped_as_late", late, r.batch, r))
        if r.intent == "duplicate":
            dd = self.op_of("dedup", r.side)
            if dd is None or not self.dropped(dd, r.batch, "numDroppedDuplicateRows"):
                return Fate(r, "undetermined", cause=Cause("undetermined", dd, r.batch, r, "designed a duplicate, none dropped"))
            original = self.original(r)  # the same key's record written already: nothing of the key was lost
            if original is not None and original.group == r.group and original.rid in self.sink:
                return Fate(r, "reached", batches=sorted({b for b, _ in self.sink[original.rid]}))
            return Fate(r, "lost", cause=Cause("dropped_as_duplicate", dd, r.batch, r))
        if self.p.join:
            return Fate(r, "lost", cause=self.join_cause(r, records))
        return Fate(r, "undetermined", cause=Cause("undetermined", None, r.batch, r, f"designed {r.intent}, yet lost"))

    def original(self, r: Record) -> Record | None:
        """The record a duplicate repeats: the first one read with its dedup key."""
        with_time = self.p.dedup and self.p.dedup["kind"] == "with_time"
        same = [
            o
            for o in self.records
            if o.rid != r.rid
            and o.side == r.side
            and o.values.get("eid") == r.values.get("eid")
            and (not with_time or o.values.get("time") == r.values.get("time"))
            and o.batch is not None
            and r.batch is not None
            and o.batch < r.batch
            and o.passed
        ]
        return min(same, key=lambda o: (o.batch or 0, o.row), default=None)

    def join_cause(self, r: Record, records: list[Record]) -> Cause:
        """Why a join row never matched: the other side's records of its key, as Spark treated them."""
        j = self.op_of("join", r.side)
        other = "right" if r.side == "left" else "left"
        others = sorted((o for o in records if o.side == other), key=lambda o: (o.batch or 0, o.row))
        if not others:
            return Cause("no_match_in_input", j, r.batch, r)
        for o in others:
            f = self.lost(o, [])
            if f.state == "lost" and f.cause and f.cause.kind in ("filtered", "dropped_as_late", "dropped_as_duplicate"):
                continue
            return Cause("condition_not_met", j, max(r.batch or 0, o.batch or 0), o)
        c = self.lost(others[0], []).cause
        assert c is not None
        return c

    def key(self, key: str, ask: str | None, design: str) -> KeyTruth:
        p = self.p
        role = None
        if ask is not None:
            role = next((r for r, c in p.sources[0].cols.items() if c == ask), None)
        if p.join:
            recs = [r for r in self.records if r.values.get("key") == key]
        elif role is not None:
            recs = [r for r in self.records if r.values.get(role) == key]
        else:
            recs = [r for r in self.records if r.group == key]
        unread = [r for r in recs if r.batch is None]  # in a file Spark's source log does not list
        recs = [r for r in recs if r.batch is not None]
        recs.sort(key=lambda r: (r.batch or 0, r.side, r.source, r.row))
        fates = [self.fate(r, recs) for r in recs]
        if p.join and p.join["type"] == "left_semi" and any(r.side == "left" for r in recs):
            fates = [f for f in fates if f.record.side == "left"]  # a semi join writes the left side's rows alone
        t = KeyTruth(key, ask, design, NEVER, None, [], fates, in_sink=key in self.sink_values)
        t.unread = [f"{r.source}/{r.file}" for r in unread]
        surprises = [r for r in unread if r.intent != "stale"] + [r for r in recs if r.intent == "stale"]
        if surprises:  # a file read or not read against the design
            t.outcome, t.why = UNDETERMINED, "; ".join(f"{r.where()}: designed {r.intent}" for r in surprises)
            return t
        if not recs:
            t.cause = Cause("never_in_input", None, None)
            return t
        undetermined = [f for f in fates if f.state == "undetermined"]
        if undetermined:
            t.outcome, t.why = (
                UNDETERMINED,
                "; ".join(f"{f.record.where()}: {f.cause.note if f.cause else ''}" for f in undetermined),
            )
            return t
        reached = [f for f in fates if f.state == "reached"]
        waiting = [f for f in fates if f.state == "waiting"]
        lost = [f for f in fates if f.state == "lost"]
        t.causes = [f.cause for f in lost if f.cause]
        if reached and all(f.padded for f in reached):
            t.outcome, t.cause = UNMATCHED, next((f.cause for f in reached if f.cause), None)
            t.causes = [f.cause for f in reached if f.cause]
        elif reached and lost:
            t.outcome, t.cause = PARTLY, t.causes[0]
        elif reached:
            t.outcome = WRITTEN
            if waiting:  # where it waits: any operator holding one of its records
                t.causes = [Cause("waiting_for_watermark", op, None) for op in sorted({f.operator for f in waiting})]
                t.cause = t.causes[0]
        elif waiting:
            t.outcome, t.cause = WAITING, self.waiting_cause(waiting[0], recs)
            first = waiting[0].record
            if p.join and waiting[0].operator == self.op_of("join", first.side):
                t.unplanned = [self.join_cause(first, recs)]
        else:
            t.outcome, t.cause = LOST, t.causes[0]
        return t

    def waiting_cause(self, f: Fate, recs: list[Record]) -> Cause:
        """A join row held without a match on a side the join does not preserve waits for a match; else for the watermark."""
        p, r = self.p, f.record
        if p.join and f.operator == self.op_of("join", r.side) and r.side not in PRESERVED.get(p.join["type"], ()):
            return self.join_cause(r, recs)
        return Cause("waiting_for_watermark", f.operator, None)


# --------------------------------------------------------------------------- reading


def _read(path: Path, fmt: str) -> list[dict[str, Any]]:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text()
    if fmt == "json":
        return [json.loads(x) for x in text.splitlines() if x.strip()]
    return [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _norm(v: Any) -> Any:
    """A key's value as the designed keys hold it: a number as its digits (a CSV sink's text alike)."""
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _int(v: Any) -> int | None:
    if v is None or v == "":
        return None
    return int(v)


def _rids_in(row: Any, by_group: dict[Any, list[Record]]) -> list[str]:
    """The records a state row holds: by id, by the ids it lists, or by its key and powers of two."""
    names = row.__fields__  # a value, a list's element, a map's key and value (transformWithState)
    key = _fields(row["key"])
    value = [f for n in names if n not in ("key", "partition_id") for f in _fields(row[n])]
    out = [v for n, v in value if n == "rid" and v]
    for n, v in value:
        if n == "rids" and v:
            out += [x for x in v.split(",") if x]
    if out:
        return out
    strings = {v for _, v in key + value if isinstance(v, str)} | {_norm(v) for _, v in key if isinstance(v, int)}
    ints = [(n, v) for n, v in value if isinstance(v, int) and not isinstance(v, bool)]
    bits = [v for n, v in ints if n in BITS]  # an aggregation's buffer: the records' powers of two, or'ed or summed
    for g in strings:
        for r in by_group.get(g, []):
            num = _int(r.values.get("num")) or 0
            if num > 0 and (any(v & num for v in bits) if bits else any(v == num for _, v in ints)):  # else a join's row
                out.append(r.rid)
    return out


def _fields(struct: Any) -> list[tuple[str, Any]]:
    """A Row's fields by position (an aggregation's value has several fields named ``sum``), nested
    structs flattened (a user's function's state is one struct in the value)."""
    if struct is None:
        return []
    out: list[tuple[str, Any]] = []
    for name, v in zip(struct.__fields__, list(struct), strict=True):
        out += _fields(v) if hasattr(v, "__fields__") else [(name, v)]
    return out
