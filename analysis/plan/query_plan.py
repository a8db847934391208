"""A streaming query as its physical plan states it: sources, filters, watermarks, stateful operators.

The checkpoint records none of these; a Spark event log does. Every micro-batch's
``SparkListenerSQLExecutionStart`` carries ``physicalPlanDescription``, the plan in Spark's
*formatted* explain: a tree of numbered nodes, then one section per node::

    * HashAggregate (20)
    +- StateStoreSave (19)
       ...
                    +- StreamingSymmetricHashJoin (12)
                       :- Exchange (6)
                       :  +- * Filter (5)

    (1) Scan json
    Output [4]: [order_id#1802, customer_id#1803, status#1805, order_time#1806]
    Location: InMemoryFileIndex [file:/data/orders/part-00000.json]
    ...
    (19) StateStoreSave
    Arguments: [window#1793-T120000ms, customer_id#1803], state info [ ..., opId = 0, ...]
               stateStoreCkptIds = None, Append, 1767225404999, 1767225464999, 2

From it, per stateful operator: its id, kind, key columns (traced back through projections to
the source columns they come from), the column its watermark is on (``-T120000ms`` tags), its
output mode, and, per batch, the two watermarks Spark gave it (``eventTimeWatermarkForLateEvents``
and ``eventTimeWatermarkForEviction``: the propagated per-operator watermarks of
``WatermarkPropagator``); per source, the columns it reads and the filters between it and each
operator; the windows the query computes (tumbling or sliding, from the projection that builds
them). ``join_plans`` keeps a join's keys, type and condition for the single-operator diagnosis.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from statelens.analysis.core.operator_kinds import JOIN, behaviour, plan_nodes
from statelens.analysis.inputs.records import utc_time

JOIN_TYPES = {
    "Inner": "inner",
    "LeftOuter": "left_outer",
    "RightOuter": "right_outer",
    "FullOuter": "full_outer",
    "LeftSemi": "left_semi",
    "LeftAnti": "left_anti",  # (a join with a static table: Spark runs no stream-stream anti join)
}

_TREE_LINE = re.compile(r"^(?P<prefix>[ :|+-]*?)(?:\* )?(?P<name>[A-Za-z][^()]*?) \((?P<id>\d+)\)\s*$")
_SECTION = re.compile(r"^\((?P<id>\d+)\) (?P<name>.+?)(?: \[codegen id : \d+\])?\s*$")
_REUSES = re.compile(r"\[Reuses operator id: (\d+)\]")  # ``(13) ReusedExchange [Reuses operator id: 7]``
_DETAIL = re.compile(r"^(?P<k>[A-Z][A-Za-z ]*?)(?: \[\d+\])? ?: (?P<v>.*)$")
# an attribute: ``name#id``, ``window_time(window)#212`` (a name Spark made of a function call), with a
# watermark tag ``-T<delay>ms``
ATTR = re.compile(r"(?P<name>[A-Za-z_][\w$]*(?:\([\w$]*\))?)#(?P<id>\d+)L?(?:-T(?P<delay>\d+)ms)?")
_STATE_INFO = re.compile(r"state info \[[^\]]*?opId = (?P<op>\d+)[^\]]*\]")


@dataclass(frozen=True)
class JoinPlan:
    operator_id: int
    join_type: str | None  # inner | left_outer | ... (None: a type this reader does not name)
    plan_join_type: str  # as the plan writes it: Inner, LeftOuter ...
    left_keys: tuple[str, ...]  # field0, field1 ... of the left side's state key
    right_keys: tuple[str, ...]
    condition: str | None  # the condition besides the keys (usually the event-time range); None: keys only
    # as the plan prints it (attribute ids kept: what the predicates evaluate); not part of the join's identity
    raw_condition: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "join_type": self.join_type,
            "left_keys": list(self.left_keys),
            "right_keys": list(self.right_keys),
            "condition": self.condition,
        }


@dataclass
class PlanNode:
    node_id: int
    name: str
    children: list[PlanNode] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)

    def walk(self) -> list[PlanNode]:
        out = [self]
        for c in self.children:
            out += c.walk()
        return out


@dataclass(frozen=True)
class EpochTime:
    """A time the query makes of an input column's number since the epoch: ``timestamp_seconds(n)``
    (``timestamp_millis``, ``timestamp_micros``: ``unit_us`` µs a unit), or ``cast(n / divisor as
    timestamp)``, seconds as a double (``(col('ms') / 1000).cast('timestamp')``)."""

    column: str
    unit_us: int = 1_000_000
    divisor: float = 0.0
    scan: int | None = None  # the scan node that reads ``column`` (a source's)

    def us(self, value: Any) -> int | None:
        """The time (µs) Spark makes of the column's value: its own arithmetic, to the microsecond."""
        if isinstance(value, str):
            try:
                value = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if isinstance(value, float) and not math.isfinite(value):  # NaN, infinite: null to Spark
            return None
        if self.divisor:  # the seconds a double: Spark's double arithmetic, truncated to the microsecond
            return int(float(value) / self.divisor * 1_000_000)
        return int(value * self.unit_us)

    def time(self, value: Any) -> dt.datetime | None:
        """The timestamp Spark makes of the column's value (None: null)."""
        t = self.us(value)
        return utc_time(t) if t is not None else None


@dataclass(frozen=True)
class Window:
    """A time window the query computes from an event-time column: ``window(col, size, slide)``, or
    ``session_window(col, gap)`` (``session``: a record's own session is ``[t, t + gap)``, merged with
    the sessions it overlaps; ``size_ms`` is the gap)."""

    # the column it is computed from (``window.end``: an upstream window's end, see Column); "": a time
    # the plan does not trace to the input (Python code output it, or an expression computed it)
    column: str
    size_ms: int
    slide_ms: int
    start_ms: int = 0  # offset of the window starts
    session: bool = False
    shift_us: int = 0  # added to ``column``'s time (``window_time(window)``: an upstream window's end less 1 µs)

    def of(self, t_ms: int) -> list[tuple[int, int]]:
        """The windows holding an event time, earliest first (a session: the record's own)."""
        if self.session:
            return [(t_ms, t_ms + self.size_ms)]
        last = t_ms - (t_ms - self.start_ms) % self.slide_ms
        out = []
        start = last
        while start > t_ms - self.size_ms:
            out.append((start, start + self.size_ms))
            start -= self.slide_ms
        return out[::-1]


@dataclass(frozen=True)
class Column:
    """Where an operator's column comes from: a source column, or a window over one."""

    name: str  # as the operator sees it (window, customer_id ...)
    # the input file's column it is (None: computed otherwise); ``window.end``: the end of an upstream
    # operator's window (``window_time(window)``, shifted by ``shift_us``)
    source_column: str | None
    window: Window | None = None  # a window computed from ``window.column``
    watermark_delay_ms: int | None = None  # the column carries the watermark (a -T<delay>ms tag)
    shift_us: int = 0
    scan: int | None = None  # the plan's scan node whose output it is (a static table's, or a source's)
    via: str = ""  # the node of Python code that output it (``MapInPandas`` ...): what it holds is not in the plan
    # a time the query makes of an input column's number (not ``source_column``: its values are not the
    # time's); a record's time of this name is made as the query makes it (``QueryPlan.epoch_times``)
    epoch: EpochTime | None = None


@dataclass
class SourceScan:
    node_id: int
    format: str  # json | csv | parquet | text | orc ... (the Scan's name)
    columns: list[str]
    location: str  # the files or folder the Scan read in that batch
    pushed_filters: str = ""


@dataclass(frozen=True)
class BatchJoin:
    """A join inside the streaming plan that is not a stream-stream join (``BroadcastHashJoin``,
    ``SortMergeJoin`` ...): a stream joined with a static table. Which side is static the plan alone
    does not say: the side whose scans are none of the checkpoint's sources."""

    node_id: int
    join_type: str | None  # inner | left_outer | ... (None: a type this reader does not name)
    keys: dict[str, tuple[str, ...]]  # side (left/right) -> its key columns, in order
    condition: str | None
    scans: dict[str, tuple[int, ...]]  # side -> the scan nodes under it
    output: dict[str, tuple[str, ...]]  # side -> the columns it brings

    def behaviour(self, stream_side: str) -> StaticJoinBehaviour | None:
        """What the join does with a stream row on ``stream_side`` (None: a join not followed: a type
        not named, a condition besides the keys, or a semi or anti join whose output is the table's rows)."""
        if self.condition is not None:
            return None
        kept = {"inner": (), "left_outer": ("left",), "right_outer": ("right",), "full_outer": ("left", "right")}
        if self.join_type in kept:
            return StaticJoinBehaviour(True, stream_side in kept[self.join_type], True)
        if self.join_type in ("left_semi", "left_anti") and stream_side == "left":
            return StaticJoinBehaviour(self.join_type == "left_semi", self.join_type == "left_anti", False)
        return None


@dataclass(frozen=True)
class StaticJoinBehaviour:
    keeps_matched: bool  # a row the table holds goes on (an anti join removes it)
    keeps_unmatched: bool  # a row the table lacks goes on (an outer join on its side, an anti join)
    adds_columns: bool  # the row goes on with the table's columns (a semi or anti join adds none)


@dataclass
class StatefulOperator:
    operator_id: int
    kind: str  # join | aggregation | dedup | dedup_within_watermark | session_window | group_state | ...
    node: str  # the physical node's name
    keys: list[Column]  # the state key's columns, in the key's order (a join: the left side's)
    right_keys: list[Column] = field(default_factory=list)  # a join's right side key columns
    watermark_columns: dict[str, Column] = field(default_factory=dict)  # input side ("" or left/right) -> column
    output_mode: str | None = None  # Append | Update | Complete (aggregations, as the plan states)
    join: JoinPlan | None = None
    sources: dict[str, list[int]] = field(default_factory=dict)  # input side -> source scan node ids under it
    upstream: dict[str, list[int]] = field(default_factory=dict)  # input side -> stateful operators under it
    filters: dict[int, list[str]] = field(default_factory=dict)  # scan node id -> conditions between it and here
    # upstream stateful operator -> the conditions between its output and here (a filter after a dedup ...)
    upstream_filters: dict[int, list[str]] = field(default_factory=dict)
    # scan node id -> the batch joins between it and here, each with how many of ``filters[scan]`` (listed
    # from here down) are above it
    batch_joins: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def sides(self) -> list[str]:
        return list(behaviour(self.kind).sides)


@dataclass(frozen=True)
class OperatorWatermarks:
    """The watermarks Spark gave one operator in one batch (ms; None: no watermark)."""

    late: int | None  # rows at or before it are late (eventTimeWatermarkForLateEvents)
    eviction: int | None  # state at or before it is evicted (eventTimeWatermarkForEviction)
    cleanup: dict[str, int] = field(default_factory=dict)  # a join: side -> its state value watermark (ms)


@dataclass
class QueryPlan:
    root: PlanNode
    operators: dict[int, StatefulOperator]
    scans: dict[int, SourceScan]
    watermark_delays: dict[str, int]  # event-time column -> delay (ms), from EventTimeWatermark nodes
    batch_watermarks: dict[int, dict[int, OperatorWatermarks]] = field(default_factory=dict)  # batch -> op -> marks
    batch_joins: dict[int, BatchJoin] = field(default_factory=dict)  # node id -> a join with a static table
    output: tuple[Column, ...] = ()  # the columns the query writes, each with where it comes from
    # the times the query makes of input numbers (``timestamp_millis(ts) AS ts``), each with the name it gives it
    epoch_times: tuple[tuple[str, EpochTime], ...] = ()

    def written_as(self, column: str) -> str | None:
        """The name the query writes an input column under when it renamed it (``user AS customer``):
        None when it writes it under its own name, or does not write it, or writes it more than once."""
        if any(c.name == column for c in self.output):
            return None
        names = [c.name for c in self.output if c.source_column == column and c.window is None]
        return names[0] if len(names) == 1 else None

    def chain(self, scan_id: int) -> list[tuple[StatefulOperator, str]]:
        """The stateful operators a source's rows pass through, from the source up to the sink, each
        with the input side they enter by ("left"/"right" for a join, else "")."""
        out: list[tuple[StatefulOperator, str]] = []
        current = self._above(lambda op, side: scan_id in op.sources.get(side, []))
        while current is not None:
            out.append(current)
            below = current[0].operator_id
            current = self._above(lambda op, side, below=below: below in op.upstream.get(side, []))
        return out

    def _above(self, test: Any) -> tuple[StatefulOperator, str] | None:
        return next(((op, side) for op in self.operators.values() for side in op.sides if test(op, side)), None)


# --------------------------------------------------------------------------- text -> nodes


def readable(expr: str) -> str:
    """An expression of the plan as the query wrote it: without expression ids (``#19``), watermark
    tags (``-T120000ms``) and with intervals in words (``+ INTERVAL '-05' MINUTE`` -> ``- 5 minutes``)."""
    text = re.sub(r"#\d+L?(-T\d+ms)?", "", expr)

    def interval(m: re.Match[str]) -> str:
        sign = "-" if (m.group(1) == "+") == (m.group(2) == "-") else "+"
        n, unit = int(m.group(3)), m.group(4).lower()
        return f"{sign} {n} {unit}{'' if n == 1 else 's'}"

    text = re.sub(r"([+-]) INTERVAL '(-?)0*(\d+)' (DAY|HOUR|MINUTE|SECOND)\b", interval, text)
    return strip_parens(text)


def strip_parens(text: str) -> str:
    """Without the parentheses around the whole expression: ``((a = 1))`` -> ``a = 1``."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets and parentheses."""
    parts, depth, cur = [], 0, ""
    for c in text:
        depth += (c in "([") - (c in ")]")
        if c == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _bracketed(text: str, start: int = 0) -> tuple[str, int] | None:
    """The text inside the first ``[...]`` at or after ``start`` and the index after it."""
    i = text.find("[", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        depth += (text[j] == "[") - (text[j] == "]")
        if depth == 0:
            return text[i + 1 : j], j + 1
    return None


def parse_nodes(plan: str) -> PlanNode | None:
    """The node tree of a formatted physical plan, each node with its section's details."""
    lines = plan.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("== Physical Plan ==")) + 1
    except StopIteration:
        return None
    nodes: dict[int, PlanNode] = {}
    stack: list[tuple[int, PlanNode]] = []
    root: PlanNode | None = None
    i = start
    while i < len(lines) and lines[i].strip():
        m = _TREE_LINE.match(lines[i])
        i += 1
        if not m:
            continue
        prefix = m.group("prefix")
        depth = len(prefix) // 3  # a child's prefix ends in "+- " or ":- " three columns per level in
        node = PlanNode(int(m.group("id")), m.group("name").strip())
        nodes[node.node_id] = node
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            stack[-1][1].children.append(node)
        else:
            root = node
        stack.append((depth, node))
    current: PlanNode | None = None
    key = None
    for line in lines[i:]:
        m = _SECTION.match(line)
        if m and int(m.group("id")) in nodes:
            current, key = nodes[int(m.group("id"))], None
            reused = _REUSES.search(m.group("name"))
            if reused and int(reused.group(1)) in nodes and not current.children:  # its rows are the reused node's
                current.children.append(nodes[int(reused.group(1))])
            continue
        if current is None or not line.strip():
            continue
        d = _DETAIL.match(line)
        if d:
            key = d.group("k").strip()
            current.details[key] = d.group("v").strip()
        elif key:  # a detail that wraps
            current.details[key] += " " + line.strip()
    return root


# --------------------------------------------------------------------------- nodes -> query


def _attrs(text: str) -> list[tuple[str, int, int | None]]:
    return [
        (m.group("name"), int(m.group("id")), int(m.group("delay")) if m.group("delay") else None) for m in ATTR.finditer(text)
    ]


_WINDOW_SLIDE = re.compile(r"% (\d+)\)")
_WINDOW_SIZE = re.compile(r"\+ (\d+)\), LongType, TimestampType\)")
_WINDOW_OFFSET = re.compile(r"- (-?\d+)\) % ")


_SESSION_GAP = re.compile(
    r", end, knownnullable\(precisetimestampconversion\(precisetimestampconversion\([^,]*? \+ (?P<gap>[^,]+?), "
)
# a time from an input number since the epoch: timestamp_seconds(n#1L) (_millis, _micros), or
# cast((cast(n#1L as double) / 1000.0) as timestamp)
_ATTR_REF = r"(?:cast\()?[A-Za-z_][\w$]*#\d+L?(?:-T\d+ms)?(?: as \w+\))?"
_EPOCH_FN = re.compile(rf"^timestamp_(?P<unit>seconds|millis|micros)\({_ATTR_REF}\)$")
_EPOCH_DIVIDED = re.compile(rf"^cast\(\({_ATTR_REF} / (?P<divisor>\d+(?:\.\d+)?(?:E\d+)?)\) as timestamp\)$")
_UNIT_US = {"seconds": 1_000_000, "millis": 1_000, "micros": 1}
_WINDOW_END_TIME = re.compile(
    r"^precisetimestampconversion\(\(precisetimestampconversion\((?P<name>[A-Za-z_][\w$]*)#(?P<id>\d+)L?(?:-T\d+ms)?\.end, "
    r"TimestampType, LongType\) - (?P<shift>\d+)\), LongType, TimestampType\)$"
)


def _window_of(expr: str, lineage: dict[int, Column]) -> Window | None:
    """A ``window(col, size[, slide[, start]])`` or ``session_window(col, gap)`` as Spark expands it
    (named_struct(start, ..., end, ...))."""
    if not expr.startswith(("named_struct(start", "knownnullable(named_struct(start")):
        return None
    sources = [lineage.get(i) for _, i, _ in _attrs(expr)]
    found = next((c for c in sources if c is not None and (c.source_column or c.epoch)), None)
    # over an input column, or a time the query makes of a number (a record holds it under its name: see epoch_times)
    col = (found.source_column or (found.name if found.epoch else "")) if found is not None else ""
    shift = found.shift_us if found is not None else 0
    gap = _SESSION_GAP.search(expr)
    if gap and "%" not in expr:  # a session: its end is the event time plus the gap (a dynamic gap is not read)
        ms = _interval_ms(gap.group("gap"))
        return Window(col, ms, ms, session=True, shift_us=shift) if ms else None
    slide = _WINDOW_SLIDE.search(expr)
    sizes = _WINDOW_SIZE.findall(expr)
    offset = _WINDOW_OFFSET.search(expr)
    if not slide or not sizes:
        return None
    start = int(offset.group(1)) // 1000 if offset else 0
    return Window(col, int(sizes[-1]) // 1000, int(slide.group(1)) // 1000, start, shift_us=shift)


def _epoch_time(expr: str, lineage: dict[int, Column]) -> EpochTime | None:
    """The time an expression makes of one input column's number since the epoch (None: not such a time)."""
    fn, divided = _EPOCH_FN.match(expr), _EPOCH_DIVIDED.match(expr)
    refs = _attrs(expr)
    src = lineage.get(refs[0][1]) if (fn or divided) and refs else None
    if src is None or not src.source_column:
        return None
    if fn:
        return EpochTime(src.source_column, _UNIT_US[fn.group("unit")], scan=src.scan)
    divisor = float(divided.group("divisor")) if divided else 0.0
    return EpochTime(src.source_column, divisor=divisor, scan=src.scan) if divisor else None


def _lineage(root: PlanNode) -> dict[int, Column]:
    """Expression id -> where the column comes from, following Project aliases bottom up."""
    out: dict[int, Column] = {}

    def visit(node: PlanNode) -> None:
        for c in node.children:
            visit(c)
        if node.name.startswith(("Scan", "BatchScan", "LocalTableScan")):
            for name, i, _ in _attrs(node.details.get("Output", "")):
                out[i] = Column(name, name, scan=node.node_id)
        elif node.name in PYTHON_NODES:  # rows through Python code: its new columns are whatever it made
            # (``Arguments: fn(in#0, ...)#18, [out#19, ...], false``: the output after the call)
            text = node.details.get("Arguments", "")
            after = _bracketed(text, text.rfind("["))
            for name, i, _ in _attrs(node.details.get("Output") or (after[0] if after else "")):
                out.setdefault(i, Column(name, None, via=node.name))
        elif node.name == "Expand":  # sliding windows: one projection per window a row falls in
            args = split_top(node.details.get("Arguments", ""))
            projections = split_top(args[0][1:-1]) if len(args) == 2 and args[0].startswith("[") else []
            first = split_top(projections[0][1:-1]) if projections else []
            names = _attrs(args[1]) if len(args) == 2 else []
            for expr, (name, i, _) in zip(first, names, strict=False):
                window = _window_of(expr, out)
                refs = _attrs(expr)
                if window is not None:
                    out[i] = Column(name, None, window)
                elif len(refs) == 1 and refs[0][1] in out:
                    out[i] = out[refs[0][1]]
        elif node.name == "Project" or node.name.endswith("HashAggregate") or node.name == "SortAggregate":
            listed = _bracketed(node.details.get("Output" if node.name == "Project" else "Results", ""))
            for item in split_top(listed[0]) if listed else []:
                m = re.match(r"^(?P<expr>.*) AS (?P<name>[A-Za-z_][\w$]*(?:\([\w$]*\))?)#(?P<id>\d+)L?(?:-T\d+ms)?$", item)
                if not m:
                    continue
                expr, alias, i = m.group("expr"), m.group("name"), int(m.group("id"))
                refs = _attrs(expr)
                window = _window_of(expr, out)
                end_time = _WINDOW_END_TIME.match(expr)
                if window is not None:
                    out[i] = Column(alias, None, window)
                elif end_time:  # window_time(window): an upstream window's end less a microsecond
                    upstream = out.get(int(end_time.group("id")))
                    out[i] = Column(
                        alias,
                        f"{upstream.name if upstream else end_time.group('name')}.end",
                        shift_us=-int(end_time.group("shift")),
                    )
                elif len(refs) == 1 and re.fullmatch(r"(cast\()?[\w$]+#\d+L?(-T\d+ms)?( as \w+\))?", expr):
                    src = out.get(refs[0][1])
                    out[i] = Column(
                        alias,
                        src.source_column if src else None,
                        src.window if src else None,
                        shift_us=src.shift_us if src else 0,
                        scan=src.scan if src else None,
                        via=src.via if src else "",
                        epoch=src.epoch if src else None,
                    )
                elif (epoch := _epoch_time(expr, out)) is not None:
                    out[i] = Column(alias, None, epoch=epoch)
                elif i not in out:
                    out[i] = Column(alias, None)

    visit(root)
    return out


def _column(text: str, lineage: dict[int, Column]) -> Column:
    refs = _attrs(text)
    if not refs:
        return Column(readable(text), None)
    name, i, delay = refs[0]
    return replace(lineage.get(i, Column(name, None)), name=name, watermark_delay_ms=delay)


def _marks(args: str, node: str = "") -> tuple[int | None, int | None]:
    """(late, eviction) watermarks from a stateful node's arguments: the first two numbers (or
    ``None``s) after its ``state info [...]`` and ``stateStoreCkptIds``."""
    m = _STATE_INFO.search(args)
    if not m:
        return None, None
    rest = args[m.end() :]
    rest = re.sub(r"^\s*stateStoreCkptIds = (None|\S+?),", "", rest)
    # a user's function (flatMapGroupsWithState, applyInPandasWithState, transformWithState) prints its
    # state format, output mode, timeout or time mode and the batch's timestamp first: the watermarks follow
    timed = re.search(
        r"\b(NoTimeout|ProcessingTimeTimeout|EventTimeTimeout|NoTime|ProcessingTime|EventTime)\s*,\s*-?\d+\s*,", rest
    )
    if timed:
        rest = rest[timed.end() :]
    elif node.startswith("TransformWithState"):  # its batch's two timestamps come first
        rest = ",".join(split_top(rest)[2:])
    found: list[int | None] = []
    for token in split_top(rest):
        token = token.strip()
        if token == "None":
            found.append(None)
        elif re.fullmatch(r"-?\d+", token):
            found.append(int(token))
        elif token.startswith("Some(") and re.fullmatch(r"Some\((-?\d+)\)", token):
            found.append(int(token[5:-1]))
        if len(found) == 2:
            break
    while len(found) < 2:
        found.append(None)
    return found[0], found[1]


def _cleanup(args: str) -> dict[str, int]:
    """A join's state value watermarks per side, from ``state cleanup [ left value predicate: (t <= N) ...]``."""
    out = {}
    for side in ("left", "right"):
        m = re.search(side + r" (?:value|key) predicate: \(.*? <= (-?\d+)\)", args)
        if m:
            out[side] = int(m.group(1)) // 1000
    return out


def _join(op_id: int, args: str, left_output: str = "", right_output: str = "") -> JoinPlan | None:
    """A stream-stream join from its node's arguments; its outputs (``Left output`` and ``Right output``)
    name the side of a column both sides have (``right.ts >= left.ts``, not ``ts >= ts``)."""
    m = re.match(r"^\[(?P<left>.*?)\], \[(?P<right>.*?)\], (?P<type>\w+), condition = \[(?P<cond>.*?)\], state info", args)
    if not m:
        return None
    full = re.search(r"full = (.*?)\s*$", m.group("cond"))
    cond = full.group(1).strip() if full else "null"
    return JoinPlan(
        op_id,
        JOIN_TYPES.get(m.group("type")),
        m.group("type"),
        tuple(readable(p) for p in split_top(m.group("left"))),
        tuple(readable(p) for p in split_top(m.group("right"))),
        None if cond == "null" else readable(_qualified(cond, left_output, right_output)),
        None if cond == "null" else cond,
    )


def _qualified(expr: str, left_output: str, right_output: str) -> str:
    """``expr`` with each attribute whose name both sides have prefixed by its side (``left.``, ``right.``)."""
    sides = {"left": _attrs(left_output), "right": _attrs(right_output)}
    names = {side: {n for n, _, _ in attrs} for side, attrs in sides.items()}
    side_of = {i: side for side, attrs in sides.items() for _, i, _ in attrs}
    both = names["left"] & names["right"]

    def qualify(m: re.Match[str]) -> str:
        side = side_of.get(int(m.group("id")))
        return f"{side}.{m.group(0)}" if side and m.group("name") in both else m.group(0)

    return ATTR.sub(qualify, expr)


def _watermark_column(node: PlanNode, key: str, lineage: dict[int, Column]) -> Column | None:
    for name, i, delay in _attrs(node.details.get(key, "")):
        if delay is not None:
            return replace(lineage.get(i, Column(name, None)), name=name, watermark_delay_ms=delay, via="")
    return None


def query_plan(plan: str, empty_sources: bool = False) -> QueryPlan | None:
    """The query of a formatted physical plan (None: no plan, or no stateful operator in it).
    ``empty_sources``: a batch without new data, whose sources Spark planned as empty
    ``LocalTableScan`` nodes: those are the sources."""
    root = parse_nodes(plan)
    if root is None:
        return None
    lineage = _lineage(root)
    # the top node's columns: its Output (a Project), Results (an aggregate), else its Input (passed on as is)
    top = _bracketed(next((root.details[k] for k in ("Output", "Results", "Input") if root.details.get(k)), ""))
    output = tuple(
        lineage.get(refs[-1][1], Column(refs[-1][0], None))
        for item in (split_top(top[0]) if top else [])
        if (refs := _attrs(item))
    )
    scans: dict[int, SourceScan] = {}
    delays: dict[str, int] = {}
    joins: dict[int, BatchJoin] = {}
    operators: dict[int, StatefulOperator] = {}
    for node in root.walk():
        if node.name.startswith("Scan ") or node.name == "Scan" or (empty_sources and node.name == "LocalTableScan"):
            fmt = node.name.split(" ", 1)[1].strip().lower() if node.name.startswith("Scan ") else "unknown"
            loc = node.details.get("Location", "")
            scans[node.node_id] = SourceScan(
                node.node_id,
                fmt,
                [a[0] for a in _attrs(node.details.get("Output", ""))],
                loc,
                node.details.get("PushedFilters", ""),
            )
        elif node.name.startswith(BATCH_JOINS) and len(node.children) == 2:
            joins[node.node_id] = _batch_join(node)
        elif node.name == "EventTimeWatermark":
            m = re.search(r", (?P<col>[A-Za-z_][\w$]*)#\d+: \w+, (?P<delay>.+)$", node.details.get("Arguments", ""))
            if m:
                delays[m.group("col")] = _interval_ms(m.group("delay"))
    for node in root.walk():
        kind = plan_nodes().get(node.name)
        args = node.details.get("Arguments", "")
        m = _STATE_INFO.search(args)
        if kind is None or not m:
            continue
        op_id = int(m.group("op"))
        op = StatefulOperator(op_id, kind, node.name, [])
        if kind == JOIN:
            op.join = _join(op_id, args, node.details.get("Left output", ""), node.details.get("Right output", ""))
            lists = re.match(r"^\[(?P<left>.*?)\], \[(?P<right>.*?)\],", args)
            if lists:
                op.keys = [_column(p, lineage) for p in split_top(lists.group("left"))]
                op.right_keys = [_column(p, lineage) for p in split_top(lists.group("right"))]
            for side, key in (("left", "Left output"), ("right", "Right output")):
                col = _watermark_column(node, key, lineage)
                if col:
                    op.watermark_columns[side] = col
        else:
            keys = _bracketed(args)
            # [keys], ... ; a user's function first: func(...)#id, [grouping keys], ...
            grouped = args.startswith("[") or behaviour(kind).function
            op.keys = [_column(p, lineage) for p in split_top(keys[0])] if keys and grouped else []
            col = _watermark_column(node, "Input", lineage) or _watermark_column(node, "Left output", lineage)
            if col:
                op.watermark_columns[""] = col
            mode = re.search(r"\b(Append|Update|Complete)\b", args[m.end() :])
            op.output_mode = mode.group(1) if mode else None
        for i, side in enumerate(op.sides):
            op.sources[side], op.upstream[side] = [], []
            if i < len(node.children):
                _below(node.children[i], op, side, [], scans)
        operators[op_id] = op
    if not operators:
        return None
    epochs = tuple(dict.fromkeys((c.name, c.epoch) for c in lineage.values() if c.epoch is not None))
    return QueryPlan(root, operators, scans, delays, batch_joins=joins, output=output, epoch_times=epochs)


# nodes that run the user's Python over whole rows: the columns they output are not the input's
PYTHON_NODES = ("MapInPandas", "MapInArrow", "PythonMapInArrow", "FlatMapGroupsInPandas", "FlatMapCoGroupsInPandas", "MapInBatch")
BATCH_JOINS = ("BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin", "BroadcastNestedLoopJoin", "CartesianProduct")
_PLAN_JOIN_TYPE = re.compile(r"\b(Inner|LeftOuter|RightOuter|FullOuter|LeftSemi|LeftAnti|Cross)\b")


def _batch_join(node: PlanNode) -> BatchJoin:
    kind = node.details.get("Join type") or (m.group(1) if (m := _PLAN_JOIN_TYPE.search(node.name)) else "")
    cond = node.details.get("Join condition", "None").strip()
    keys, scans, output = {}, {}, {}
    for side, child in zip(("left", "right"), node.children, strict=True):
        keys[side] = tuple(a[0] for a in _attrs(node.details.get(f"{side.title()} keys", "")))
        found = [n for n in child.walk() if n.name.startswith(("Scan", "BatchScan", "LocalTableScan"))]
        scans[side] = tuple(n.node_id for n in found)
        output[side] = tuple(dict.fromkeys(a[0] for n in found for a in _attrs(n.details.get("Output", ""))))
    return BatchJoin(
        node.node_id, JOIN_TYPES.get(kind, kind.lower() or None), keys, None if cond == "None" else readable(cond), scans, output
    )


def _below(
    node: PlanNode,
    op: StatefulOperator,
    side: str,
    conditions: list[str],
    scans: dict[int, SourceScan],
    joins: tuple[tuple[int, int], ...] = (),
) -> None:
    """Record the sources and stateful operators directly under ``op`` on one side, with the
    filters on the way down to each source, and the joins with static tables on the way."""
    m = _STATE_INFO.search(node.details.get("Arguments", ""))
    if node.name in plan_nodes() and m:
        op.upstream[side].append(int(m.group("op")))
        op.upstream_filters[int(m.group("op"))] = list(conditions)
        return
    here = list(conditions)
    if node.name == "Filter" and node.details.get("Condition"):
        here.append(node.details["Condition"])  # as Spark printed it (``readable`` shows it)
    if node.node_id in scans:
        op.sources[side].append(node.node_id)
        op.filters[node.node_id] = here
        if joins:
            op.batch_joins[node.node_id] = list(joins)
        return
    if node.name.startswith(BATCH_JOINS) and len(node.children) == 2:
        joins = (*joins, (node.node_id, len(here)))
    for c in node.children:
        _below(c, op, side, here, scans, joins)


def _interval_ms(text: str) -> int:
    units = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
    total = 0
    for n, unit in re.findall(r"(\d+) (millisecond|second|minute|hour|day)s?", text):
        total += int(n) * units[unit]
    return total


def batch_watermarks(plan: str) -> dict[int, OperatorWatermarks]:
    """Operator -> the watermarks Spark gave it in the batch this plan ran (read from the writer
    nodes' arguments without building the whole query: one pass per batch)."""
    out: dict[int, OperatorWatermarks] = {}
    node = ""
    for line in plan.split("\n"):
        section = _SECTION.match(line)
        if section:
            node = section.group("name")
            continue
        if node not in plan_nodes() or not line.startswith("Arguments: "):
            continue
        m = _STATE_INFO.search(line)
        if m:
            late, eviction = _marks(line[len("Arguments: ") :], node)
            out[int(m.group("op"))] = OperatorWatermarks(late, eviction, _cleanup(line))
    return out


def join_plans(plan: str) -> dict[int, JoinPlan]:
    """Operator id -> the join, for every StreamingSymmetricHashJoin node of a physical plan description."""
    out: dict[int, JoinPlan] = {}
    outputs = {"Left output": "", "Right output": ""}
    for line in plan.split("\n"):
        head = line.split(" [", 1)[0]
        if head in outputs:
            outputs[head] = line
        elif line.startswith("Arguments: [") and "condition = [" in line:
            m = _STATE_INFO.search(line)
            j = _join(int(m.group("op")), line[len("Arguments: ") :], *outputs.values()) if m else None
            if j is not None:
                out[j.operator_id] = j
    return out


def operator_watermarks(
    batches: list[tuple[int, int]], planned: dict[int, dict[int, OperatorWatermarks]], operator_ids: list[int]
) -> tuple[dict[int, dict[int, OperatorWatermarks]], list[int]]:
    """batch -> operator -> its watermarks, for every batch of ``batches`` ((batch, global watermark)).

    Where an event log's plan ran a batch, its figures are Spark's own. Elsewhere they are worked out
    as ``PropagateWatermarkSimulator`` does (Spark 3.4+): an operator drops rows at or before its input
    watermark of the previous batch and evicts state by this batch's; every operator's input
    watermark is 0 while the query's is 0; an operator below which a join trims the watermark (its
    output watermark is its state watermark) trails the query's watermark by what the plans show it
    trailed in other batches. Returns the figures and the batches that were worked out."""
    trail: dict[int, int] = {}
    side_trail: dict[tuple[int, str], int] = {}
    glob = dict(batches)
    for b, ops in planned.items():
        g = glob.get(b)
        if not g:
            continue
        for op, m in ops.items():
            if m.eviction is not None:
                trail.setdefault(op, g - m.eviction)
            for side, c in m.cleanup.items():
                side_trail.setdefault((op, side), g - c)
    seen = {op for ops in planned.values() for op in ops}
    unmarked = {op for op in seen if all(ops[op].eviction is None for ops in planned.values() if op in ops)}
    out: dict[int, dict[int, OperatorWatermarks]] = {}
    worked_out: list[int] = []
    prev = 0
    for b, g in batches:
        if b in planned:
            out[b] = planned[b]
        else:
            worked_out.append(b)
            out[b] = {
                op: OperatorWatermarks(None, None)
                if op in unmarked
                else OperatorWatermarks(
                    (prev - trail.get(op, 0)) if prev else 0,
                    (g - trail.get(op, 0)) if g else 0,
                    {side: g - t for (o, side), t in side_trail.items() if o == op and g},
                )
                for op in operator_ids
            }
        prev = g
    return out, worked_out
