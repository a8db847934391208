"""A seed -> a pipeline: its parts chosen among what Spark allows together, and input batches with
keys designed for each fate.

Every batch reads one file of each source. Batch ``b`` is at ``step * b`` minutes of event time (a
source's records 20 seconds apart from the other's): a steady key sends a record in every batch
on every source, which moves the watermark. Each other key is designed for one fate (written,
partly written, waiting, late at the first operator that drops late rows, filtered, dropped by the
static join, a duplicate of its own or of another key's record, no match, condition not met, its
match late, never in the input, a look-alike written). A record's ``num`` is a distinct power of two
within its group, so a sum in the sink says which records it holds; a design is only a plan:
``truth`` asks Spark what happened.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pipegen.spec import EPOCH_TIMES, Filter, Pipeline, Source, Static, group_of

THEMES = [
    {
        "sources": ("logins", "logins_backup"),
        "cols": {"key": "user_id", "eid": "event_id", "time": "ts", "tag": "status", "flag": "ok", "num": "attempts"},
        "lookup": ("country", "region", "countries"),
        "prefix": "u",
        "renamed": {"key": "user", "tag": "state"},
    },
    {
        "sources": ("readings", "readings_replay"),
        "cols": {"key": "device_id", "eid": "reading_id", "time": "reading_time", "tag": "kind", "flag": "valid", "num": "value"},
        "lookup": ("sensor", "zone", "sensors"),
        "prefix": "dev",
        "renamed": {"key": "device", "tag": "reading_kind"},
    },
    {
        "sources": ("orders", "orders_eu"),
        "cols": {"key": "customer", "eid": "order_id", "time": "order_time", "tag": "channel", "flag": "paid", "num": "amount"},
        "lookup": ("store", "district", "stores"),
        "prefix": "c",
        "renamed": {"key": "customer_id", "tag": "sales_channel"},
    },
    {
        "sources": ("clicks", "clicks_mobile"),
        "cols": {"key": "campaign", "eid": "click_id", "time": "click_time", "tag": "device", "flag": "is_bot", "num": "cost"},
        "lookup": ("site", "network", "sites"),
        "prefix": "camp",
        "renamed": {"key": "campaign_id", "tag": "device_kind"},
    },
]
JOIN_THEMES = [
    {
        "sources": ("impressions", "ad_clicks"),
        "left": {
            "key": "ad_id",
            "eid": "impression_id",
            "time": "impression_time",
            "tag": "placement",
            "flag": "viewable",
            "num": "bid",
        },
        "right": {"key": "ad_ref", "eid": "click_id", "time": "click_time", "tag": "device", "flag": "is_bot", "num": "cost"},
        "prefix": "ad",
    },
    {
        "sources": ("orders", "shipments"),
        "left": {"key": "order_id", "eid": "order_ref", "time": "order_time", "tag": "channel", "flag": "paid", "num": "amount"},
        "right": {
            "key": "order_id",
            "eid": "shipment_id",
            "time": "ship_time",
            "tag": "carrier",
            "flag": "tracked",
            "num": "weight",
        },
        "prefix": "ord",
    },
    {  # both sides name their columns alike: the plan's condition reads ts >= ts without the sides
        "sources": ("events_a", "events_b"),
        "left": {"key": "device", "eid": "event_id", "time": "ts", "tag": "kind", "flag": "ok", "num": "value"},
        "right": {"key": "device", "eid": "event_id", "time": "ts", "tag": "kind", "flag": "ok", "num": "value"},
        "prefix": "dev",
    },
    {
        "sources": ("requests", "responses"),
        "left": {"key": "request_id", "eid": "req_event", "time": "sent_at", "tag": "method", "flag": "retried", "num": "size"},
        "right": {
            "key": "request_id",
            "eid": "resp_event",
            "time": "received_at",
            "tag": "code",
            "flag": "cached",
            "num": "bytes",
        },
        "prefix": "req",
    },
]
# themes only a named shape takes (the random draws keep to the lists above)
NAMED_THEMES = [
    {
        "sources": ("payments", "refunds"),
        "left": {
            "key": "payment_id",
            "eid": "charge_id",
            "time": "payment_time",
            "tag": "method",
            "flag": "captured",
            "num": "amount",
        },
        "right": {
            "key": "payment_id",
            "eid": "refund_id",
            "time": "refund_time",
            "tag": "reason",
            "flag": "partial",
            "num": "refund_amount",
        },
        "prefix": "pay",
    },
]
# a join's window grouped by another column of the left side than the join key: its name per theme
GROUPED_BY = {"impressions": "advertiser", "orders": "merchant", "events_a": "site", "requests": "host", "payments": "merchant"}
SHAPES = ("agg", "agg", "dedup", "join", "join", "function", "rollup")
# pipelines of the shapes users reported, each a seed with some choices made by name (``compose``)
NAMED: dict[str, tuple[int, dict[str, Any]]] = {
    # logins dropDuplicates([event_id, ts]) -> where ok = false -> transformWithStateInPandas (event-time timer),
    # RocksDB without changelog checkpointing (no change feed), into Parquet
    "login_dedup_tws": (
        1,
        {
            "shape": "function",
            "theme": "logins",
            "union": False,
            "static": False,
            "rename": False,
            "filters": ["flag_false"],
            "dedup": True,
            "dedup_kind": "with_time",
            "function": "tws_value",
            "provider": "rocksdb",
            "tws_provider": "rocksdb",
            "sink": "parquet",
        },
    ),
    # two streams unioned -> an inner join with a static table (country -> region) -> windows by region
    "union_static_regions": (
        2,
        {
            "shape": "agg",
            "theme": "logins",
            "union": True,
            "static": True,
            "static_kind": "inner",
            "dedup": False,
            "window": "tumbling",
            "provider": "hdfs",
            "sink": "parquet",
        },
    ),
    # a full outer time-range join into JSON (checked with and without the event log)
    "full_outer_json": (3, {"shape": "join", "join": "full_outer", "dedup": False, "sink": "json", "provider": "hdfs"}),
    # a left semi stream-stream join
    "left_semi": (4, {"shape": "join", "join": "left_semi", "dedup": False, "provider": "rocksdb_changelog"}),
    # sliding windows after a stream-static left outer join, RocksDB with changelog checkpointing
    "static_left_outer_sliding": (
        5,
        {
            "shape": "agg",
            "theme": "readings",
            "static": True,
            "static_kind": "left_outer",
            "dedup": False,
            "window": "sliding",
            "provider": "rocksdb_changelog",
        },
    ),
    # union -> dropDuplicatesWithinWatermark -> session windows, RocksDB without changelog checkpointing
    "union_dedup_sessions": (
        6,
        {
            "shape": "agg",
            "union": True,
            "static": False,
            "dedup": True,
            "dedup_kind": "within",
            "window": "session",
            "provider": "rocksdb",
        },
    ),
    # a left outer join of two streams that name their columns alike (the condition: right.ts >= left.ts)
    "same_columns_join": (8, {"shape": "join", "theme": "events_a", "join": "left_outer", "join_window": False}),
    # applyInPandasWithState whose state holds an ``end`` that is not a time (growth read it as one)
    "group_state_end": (7, {"shape": "function", "function": "group_state", "static": False, "provider": "hdfs"}),
    # a new user's: payments left outer joined with refunds in a time range -> 10-minute sums per merchant
    # -> Parquet, RocksDB; each key asked by its payment_id, which the windows' state key does not hold
    "payments_refunds_merchant": (
        9,
        {
            "shape": "join",
            "theme": "payments",
            "join": "left_outer",
            "join_window": True,
            "window_size": 10,
            "group_by": True,
            "dedup": False,
            "filter_left": False,
            "filter_right": False,
            "provider": "rocksdb",
            "sink": "parquet",
            "flatten": True,
            "foreach": False,
            "max_policy": False,
            "files_per_batch": 1,
        },
    ),
}
FORMATS = ("json", "csv", "parquet")
# the parts added later (``_later_parts``) are drawn for seeds from LATER_SEEDS on, and for named shapes that
# force one: the seeds and shapes run before keep the pipelines they made (committed, documented)
LATER_SEEDS = 2000
LATER_CHOICES = {"max_policy", "files_per_batch", "group_by", "foreach", "update", "complete"}
LATER = 7_000_003  # the later parts' draws: from the seed plus this
# and the parts added after those (``_newest_parts``), from NEWEST_SEEDS on
NEWEST_SEEDS = 2200
NEWEST_CHOICES = {"restart", "static_right"}
NEWEST = 9_000_011
# and the file source's options (``_source_parts``), from SOURCE_SEEDS on
SOURCE_SEEDS = 2300
SOURCE_CHOICES = {"clean_source"}
SOURCE = 11_000_027
# and the parts at a query's edges (``_edge_parts``), from EDGE_SEEDS on
EDGE_SEEDS = 2400
EDGE_CHOICES = {"static_filter", "stale_file", "int_keys", "python"}
EDGE = 13_000_049
# and the event time a query makes of a number since the epoch (``_time_parts``), from TIME_SEEDS on
TIME_SEEDS = 3800
TIME_CHOICES = {"epoch_time"}
TIME = 17_000_071
PASS_TAG = "ok"


def filter_templates(cols: dict[str, str]) -> list[Filter]:
    """Filters of the shapes Spark prints, each with a value that passes and one that does not."""
    t, f, n, k = cols["tag"], cols["flag"], cols["num"], cols["key"]
    return [
        Filter(f"{t} = 'ok'", "equals", "tag", "ok", "error"),
        Filter(f"{t} != 'test'", "not_equals", "tag", "ok", "test"),
        Filter(f"{t} IN ('ok', 'retry')", "in", "tag", "ok", "error"),
        Filter(f"{t} NOT LIKE 'health%'", "not_like", "tag", "ok", "health-check"),
        Filter(f"{f} = false", "flag_false", "flag", False, True),
        Filter(f"{f}", "flag_true", "flag", True, False),
        Filter(f"{f} IS NOT NULL", "is_not_null", "flag", True, None),
        Filter(f"{n} > 0", "num_positive", "num", 1, 0),
        Filter(f"CAST({n} AS DOUBLE) >= 1", "cast", "num", 1, 0),
        Filter(f"({t} = 'ok' OR {t} = 'retry') AND {n} > 0", "and_or", "tag", "ok", "error"),
        Filter(f"NOT ({t} = 'test')", "not", "tag", "ok", "test"),
        Filter(f"{k} NOT IN ('bot-1', 'bot-2')", "key_not_in", "key", None, "bot-1"),
    ]


@dataclass
class Rec:
    source: str
    batch: int
    key: str | None
    minute: float
    intent: str  # reach | late | filtered | static_miss | duplicate | no_match | far | other_late | wait
    values: dict[str, Any] = field(default_factory=dict)  # role -> value overriding the defaults
    rid: str = ""


class Designer:
    """The pipeline's clock and watermarks, and the records of each designed key."""

    def __init__(self, p: Pipeline, rng: random.Random, n_batches: int) -> None:
        self.p, self.rng, self.n = p, rng, n_batches
        self.recs: list[Rec] = []
        self.keys: list[dict[str, Any]] = []
        self.used: set[str] = set()
        self.eid = 0
        self.prefix = ""  # of the designed keys' values
        self.ask: str | None = None  # the column every key is asked by (None: the default)
        self.theme_prefix = ""  # of the input's own key column values

    # ---- time

    def clock(self, b: int, source: Source) -> float:
        return self.p.step * b + source.index / 3

    def watermark(self, b: int) -> float:
        """The query's watermark in batch b (minutes): the smallest (``max`` policy: the largest) of each
        source's newest time before it, less its delay."""
        if b == 0:
            return -1e9
        policy = max if self.p.watermark_policy == "max" else min
        return policy(self.clock(b - 1, s) - s.delay for s in self.p.sources)

    def late_minute(self, b: int) -> float:
        """An event time behind every late-row watermark of batch b (the watermark of the batch before:
        Spark 3.4+ drops late rows by it), windows and gaps included."""
        extra = 0
        if self.p.window:
            w = self.p.window
            extra = w.get("size", 0) + w.get("slide", 0) + w.get("gap", 0)
        if self.p.function:
            extra = 0
        return self.watermark(b - 1) - extra - 2

    # ---- keys

    def new_key(self, design: str, ask: str | None = None, value: str | None = None) -> str:
        numbers = self.p.int_keys and self.prefix == self.theme_prefix  # (a static table's groups stay names)
        while value is None or value in self.used:
            value = str(self.rng.randrange(100, 99999)) if numbers else f"{self.prefix}-{self.rng.randrange(100, 9999):04d}"
        self.used.add(value)
        self.keys.append({"key": value, "ask": ask or self.ask, "design": design})
        return value

    def rec(
        self, source: Source, b: int, key: str | None, intent: str = "reach", minute: float | None = None, **values: Any
    ) -> Rec:
        r = Rec(source.name, b, key, self.clock(b, source) if minute is None else minute, intent, dict(values))
        self.recs.append(r)
        return r

    def next_eid(self) -> str:
        self.eid += 1
        return f"e-{self.eid:05d}"


# --------------------------------------------------------------------------- the parts


class Choices:
    """The generator's random choices, each by name; a name in ``forced`` takes that value instead (the
    draw is made all the same, so forcing one choice leaves the others as the seed makes them)."""

    def __init__(self, seed: int, forced: dict[str, Any] | None = None) -> None:
        self.rng = random.Random(seed)
        self.forced = forced or {}

    def one(self, name: str, options: Any) -> Any:
        drawn = self.rng.choice(options)
        return self.forced.get(name, drawn)

    def chance(self, name: str, p: float) -> bool:
        drawn = self.rng.random() < p
        return bool(self.forced.get(name, drawn))


def compose(seed: int, forced: dict[str, Any] | None = None, name: str | None = None) -> Pipeline:
    """The pipeline a seed makes; ``forced``: choices made by name instead of by the seed (a shape a
    user reported: ``NAMED``); ``name``: its folder's name (default ``seed-NNNN``)."""
    c = Choices(seed, forced)
    shape = c.one("shape", SHAPES)
    n = c.one("batches", (10, 11, 12))
    step = c.one("step", (3, 4))
    provider = c.one("provider", ("hdfs", "rocksdb", "rocksdb_changelog"))
    sink = c.one("sink", FORMATS)
    if shape == "join":
        theme = _theme(c, JOIN_THEMES)
        sources = [
            Source(
                theme["sources"][0],
                c.one("format_left", FORMATS),
                c.one("delay_left", (2, 4, 5)),
                {"rid": "rid", **theme["left"]},
                "left",
                0,
            ),
            Source(
                theme["sources"][1],
                c.one("format_right", FORMATS),
                c.one("delay_right", (2, 4, 5)),
                {"rid": "rid", **theme["right"]},
                "right",
                1,
            ),
        ]
    else:
        theme = _theme(c, THEMES)
        two = c.chance("union", 0.45)
        cols = {"rid": "rid", **theme["cols"]}
        static = c.chance("static", 0.4) and shape in ("agg", "dedup", "function")
        if static:
            cols["lookup"] = theme["lookup"][0]
        sources = [Source(theme["sources"][0], c.one("format", FORMATS), c.one("delay", (3, 5, 8)), dict(cols), "", 0)]
        if two:
            sources.append(
                Source(theme["sources"][1], c.one("format_2", FORMATS), c.one("delay_2", (3, 5, 8)), dict(cols), "", 1)
            )
    p = Pipeline(seed, shape, sources, provider, sink, c.one("partitions", (2, 3)), step, name=name or f"seed-{seed:04d}")
    if shape == "join":
        _join_parts(p, c)
    else:
        _single_parts(p, c, theme)
    if p.function and p.function["kind"].startswith("tws") and p.provider == "hdfs":
        p.provider = c.one("tws_provider", ("rocksdb", "rocksdb_changelog"))  # transformWithState needs RocksDB
    p.flatten = c.chance("flatten", 0.3) or p.sink_fmt == "csv"
    if seed >= LATER_SEEDS or LATER_CHOICES & set(c.forced):
        _later_parts(p, Choices(seed + LATER, forced))
    if seed >= NEWEST_SEEDS or NEWEST_CHOICES & set(c.forced):
        _newest_parts(p, Choices(seed + NEWEST, forced), n)
    if seed >= SOURCE_SEEDS or SOURCE_CHOICES & set(c.forced):
        _source_parts(p, Choices(seed + SOURCE, forced))
    if seed >= EDGE_SEEDS or EDGE_CHOICES & set(c.forced):
        _edge_parts(p, Choices(seed + EDGE, forced))
    if seed >= TIME_SEEDS or TIME_CHOICES & set(c.forced):
        _time_parts(p, Choices(seed + TIME, forced))
    d = Designer(p, c.rng, n)
    d.prefix = d.theme_prefix = theme["prefix"]
    design(d)
    if p.stale_file:
        _design_stale(d)
    p.batches, p.keys = rows_of(d)
    return p


def pipeline(seed: int | str) -> Pipeline:
    """A seed's pipeline, or a named shape's (``NAMED``)."""
    if isinstance(seed, str) and seed.startswith("seed-"):
        seed = int(seed[5:])
    if isinstance(seed, str):
        number, forced = NAMED[seed]
        return compose(number, forced, seed)
    return compose(seed)


def _later_parts(p: Pipeline, c: Choices) -> None:
    """The parts added after the first wide runs, drawn apart (a seed keeps its other draws): the
    ``max`` watermark policy, two files per trigger, a join's window by another column than the join
    key, a foreachBatch sink, update mode."""
    if len(p.sources) == 2 and c.chance("max_policy", 0.3):
        p.watermark_policy = "max"
    p.files_per_batch = c.one("files_per_batch", (1, 1, 2))
    if p.join and p.window and c.chance("group_by", 0.5):
        p.join["by"] = GROUPED_BY[p.sources[0].name]
        p.sources[0].cols["lookup"] = p.join["by"]
    if c.chance("foreach", 0.3):
        p.sink_kind = "foreach"
    # Spark writes update mode to foreachBatch, not to a file sink; one aggregation (chained operators: append)
    if p.sink_kind == "foreach" and p.shape == "agg" and not p.dedup and c.chance("update", 0.8):
        p.output = "complete" if c.chance("complete", 0.3) else "update"  # complete: every group, every batch
        if p.output == "update" and p.window and p.window["kind"] == "session":  # Spark refuses update mode there
            p.output = "append"


def _newest_parts(p: Pipeline, c: Choices, n_batches: int) -> None:
    """The parts added after the later ones: the job stopped and restarted between two runs (two Spark
    applications, two event logs, one checkpoint), a static table joined with the stream on its right
    (``static.join(stream, "right_outer")``: every stream row kept, as a left outer join with it on the left)."""
    if c.chance("restart", 0.4):
        p.restart_after = c.one("restart_at", (n_batches // 3, n_batches // 2, n_batches - 2))
    if p.static and p.static.kind == "left_outer" and c.chance("static_right", 0.5):
        p.static.kind = "right_outer"


def _source_parts(p: Pipeline, c: Choices) -> None:
    """The file source's options: ``cleanSource=archive`` (each file Spark read moved under
    ``archive/`` once its batch committed: the answer finds them there, given it as the input root)."""
    p.clean_source = c.chance("clean_source", 0.4)


def _edge_parts(p: Pipeline, c: Choices) -> None:
    """The parts at a query's edges: a static table that filters the stream (a left semi join keeps the
    rows whose value it holds, a left anti join those whose value it lacks; the group is the stream's key)."""
    if p.static and p.static.kind in ("inner", "left_outer") and c.chance("static_filter", 0.7):
        p.static.kind = c.one("static_filter_kind", ("left_semi", "left_anti"))
    p.stale_file = bool(p.restart_after) and c.chance("stale_file", 0.6)
    if c.chance("int_keys", 0.35):  # the key columns hold numbers: BIGINT in the files, the plan and the state
        for src in p.sources:
            src.key_type = "BIGINT"
        p.filters = [_int_key_filter(f) for f in p.filters]
    if not p.join and c.chance("python", 0.35):
        p.python = c.one("python_kind", ("map_in_pandas", "udf"))


def _time_parts(p: Pipeline, c: Choices) -> None:
    """The event time a query makes of a number since the epoch its files hold (``EPOCH_TIMES``:
    ``timestamp_seconds``, ``timestamp_millis``, ``(ms / 1000).cast('timestamp')``), every source alike."""
    unit = c.one("epoch_unit", tuple(EPOCH_TIMES))
    if c.chance("epoch_time", 0.35):
        for src in p.sources:
            src.time_unit = unit


def _int_key_filter(f: Filter) -> Filter:
    """A filter on the key, for number keys: the same shape over numbers."""
    if f.column != "key":
        return f
    return Filter(f.expr.replace("('bot-1', 'bot-2')", "(1, 2)"), f.shape, f.column, f.passing, "1", f.source)


def _theme(c: Choices, themes: list[dict[str, Any]]) -> dict[str, Any]:
    drawn = c.rng.choice(themes)
    wanted = c.forced.get("theme")
    return next((t for t in themes + NAMED_THEMES if t["sources"][0] == wanted), drawn)


def _single_parts(p: Pipeline, c: Choices, theme: dict[str, Any]) -> None:
    cols = p.sources[0].cols
    if c.chance("rename", 0.35):
        roles = c.rng.sample(sorted(theme["renamed"]), c.rng.choice((1, 2)))
        p.rename = {role: theme["renamed"][role] for role in c.forced.get("renamed", roles)}
        p.rename_first = c.chance("rename_first", 0.5)
    _filters(p, c, {r: p.rename.get(r, col) for r, col in cols.items()} if p.rename_first else cols)
    if "lookup" in cols:
        _, produces, table = theme["lookup"]
        p.static = Static(
            table, c.one("static_format", FORMATS), c.one("static_kind", ("inner", "left_outer")), cols["lookup"], produces, []
        )
    dedup = c.chance("dedup", 0.4)
    if p.shape == "dedup" or (p.shape in ("agg", "function") and dedup):
        p.dedup = {"kind": c.one("dedup_kind", ("plain", "with_time", "within")), "side": ""}
    if p.shape == "agg":
        kind = c.one("window", ("tumbling", "sliding", "session"))
        size = c.one("window_size", (5, 10))
        p.window = {"kind": kind, "size": size if kind != "session" else 0, "slide": size // 2 if kind == "sliding" else 0}
        if kind == "session":
            p.window["gap"] = c.one("gap", (5, 8))
    if p.shape == "rollup":
        p.window = {"kind": "tumbling", "size": 5, "slide": 0}
        p.rollup = {"size": c.one("rollup_size", (15, 20))}
    if p.shape == "function":
        p.function = {"kind": c.one("function", ("group_state", "tws_value", "tws_list", "tws_map")), "gap": c.one("gap", (6, 8))}


def _filters(p: Pipeline, c: Choices, cols: dict[str, str], side: str = "") -> None:
    templates = filter_templates(cols)
    chosen: list[Filter] = []
    drawn = [c.rng.choice(templates) for _ in range(c.rng.choice((0, 1, 1, 2)))]
    wanted = c.forced.get(f"filters_{side}" if side else "filters")
    if wanted is not None:
        drawn = [next(t for t in templates if t.shape == shape) for shape in wanted]
    for f in drawn:
        roles = {g.column for g in chosen} | ({"num"} if any(g.shape == "and_or" for g in chosen) else set())
        if f.column in roles or (f.shape == "and_or" and "num" in roles):
            continue
        if f.column == "key" and p.shape == "join":
            continue
        before_union = c.rng.random() < 0.4
        if side:
            f.source = next(s.name for s in p.sources if s.side == side)
        elif len(p.sources) == 2 and before_union and wanted is None and not p.rename_first:
            f.source = c.rng.choice(p.sources).name  # before the union, on one source
        chosen.append(f)
    p.filters += chosen


def _join_parts(p: Pipeline, c: Choices) -> None:
    jt = c.one("join", ("inner", "inner", "left_outer", "right_outer", "full_outer", "left_semi"))
    p.join = {
        "type": jt,
        "lower": c.one("lower", (0, 0, 5)),
        "upper": c.one("upper", (5, 10)),
        "form": c.one("form", ("range", "between")),
    }
    for side in ("left", "right"):
        if c.chance(f"filter_{side}", 0.6) or f"filters_{side}" in c.forced:
            _filters(p, c, next(s for s in p.sources if s.side == side).cols, side)
    if c.chance("dedup", 0.35):
        p.dedup = {"kind": c.one("dedup_kind", ("with_time", "within")), "side": c.one("dedup_side", ("left", "right"))}
    if c.chance("join_window", 0.5) and jt in ("inner", "left_outer"):
        p.window = {"kind": "tumbling", "size": c.one("window_size", (10, 15)), "slide": 0}


# --------------------------------------------------------------------------- the keys


def design(d: Designer) -> None:
    p = d.p
    last = d.n - 1
    mid = d.n // 2
    srcs = p.sources
    if p.join:
        _design_join(d)
        return
    ask = p.sources[0].cols["key"] if p.shape == "dedup" else None  # a dedup's state key is its id: ask by the user's column
    if p.static and p.static.adds:
        _design_static(d)
        return
    steady = d.new_key("steady: a record in every batch of every source", ask)
    for b in range(d.n):
        for s in srcs:
            d.rec(s, b, steady)
    k = d.new_key("written: early records of each source", ask)
    for s in srcs:
        d.rec(s, 1, k)
    if p.shape != "dedup":
        k = d.new_key("waiting: a record in the last batch", ask)
        d.rec(srcs[-1], last, k, "wait")
    k = d.new_key("late: one record behind the watermark", ask)
    d.rec(srcs[0], mid + 1, k, "late", d.late_minute(mid + 1))
    k = d.new_key("partly written: one record written, one late", ask)
    d.rec(srcs[0], 1, k)
    d.rec(srcs[-1], mid + 2, k, "late", d.late_minute(mid + 2))
    if p.window and p.window["kind"] == "session":
        k = d.new_key("two sessions: records far apart, both written", ask)
        d.rec(srcs[0], 0, k)
        d.rec(srcs[-1], 4, k)
    _design_filters(d, srcs, ask)
    _design_dedup(d, srcs, ask, steady)
    _design_absent(d, srcs, ask)
    if p.static:
        _design_static_filter(d, srcs, ask)


def _design_static_filter(d: Designer, srcs: list[Source], ask: str | None) -> None:
    """A static table that filters the stream (semi or anti join): every record so far has a value the
    join keeps; a key whose record has one it drops, a key with one of each."""
    st = d.p.static
    assert st is not None
    kept, dropped = [f"{st.lookup[:2]}-{i:02d}" for i in (1, 2)], f"{st.lookup[:2]}-90"
    held = kept if st.kind == "left_semi" else [dropped]  # the table's rows
    st.rows = [{st.lookup: v, st.produces: f"{st.produces[:1]}-{i}"} for i, v in enumerate(held)]
    if st.kind == "left_semi":
        dropped = f"{st.lookup[:2]}-99"  # a value the table lacks
    for i, r in enumerate(d.recs):
        r.values.setdefault("lookup", kept[i % 2])
    how = "is not in" if st.kind == "left_semi" else "is in"
    k = d.new_key(f"dropped by the static table: its {st.lookup} {how} {st.name} ({st.kind} join)", ask)
    d.rec(srcs[0], 2, k, "static_miss", lookup=dropped)
    k = d.new_key(f"partly written: one record kept, one dropped by the static table ({st.kind} join)", ask)
    d.rec(srcs[0], 1, k, lookup=kept[0])
    d.rec(srcs[-1], 3, k, "static_miss", lookup=dropped)


def _design_filters(d: Designer, srcs: list[Source], ask: str | None) -> None:
    for i, f in enumerate(d.p.filters):
        src = d.p.source(f.source) if f.source else srcs[i % len(srcs)]
        if f.column == "key":
            k = d.new_key(f"filtered: its key fails `{f.expr}`", ask, value=f.failing)
            d.rec(src, 2, k, "filtered")
            continue
        k = d.new_key(f"filtered: its record fails `{f.expr}`", ask)
        d.rec(src, 2, k, "filtered", **{f.column: f.failing})
        k = d.new_key(f"partly written: one record passes, one fails `{f.expr}`", ask)
        d.rec(src, 1, k)
        d.rec(src, 3, k, "filtered", **{f.column: f.failing})


def _design_dedup(d: Designer, srcs: list[Source], ask: str | None, other: str) -> None:
    if not d.p.dedup:
        return
    src = srcs[0]
    eid = d.next_eid()
    k = d.new_key("written: a duplicate of its own earlier record, dropped", ask)
    first = d.rec(src, 2, k, eid=eid)
    d.rec(srcs[-1], 3, k, "duplicate", minute=first.minute, eid=eid)
    # a record reusing the id of another key's record read earlier
    theirs = next(r for r in d.recs if r.key == other and r.batch == 1 and r.source == src.name)
    theirs.values["eid"] = theirs.values.get("eid") or d.next_eid()
    k = d.new_key("lost: its only record repeats another key's record id", ask)
    d.rec(src, 2, k, "duplicate", minute=theirs.minute, eid=theirs.values["eid"])


def _design_absent(d: Designer, srcs: list[Source], ask: str | None) -> None:
    d.new_key("never in the input", ask)
    if d.p.int_keys:  # a number has no look-alike spelling in the files (a trailing space, upper case)
        return
    if d.p.sink_fmt != "csv":  # Spark's CSV writer trims trailing spaces: the sink would hold this spelling
        seen = d.new_key("near miss: a look-alike (trailing space) is written; this spelling never is", ask)
        d.keys[-1]["near"] = seen + " "
        d.rec(srcs[0], 1, seen + " ", "reach")
    upper = d.new_key("near miss: a look-alike (upper case) is written; this spelling never is", ask)
    d.keys[-1]["near"] = upper.upper()
    d.rec(srcs[-1], 2, upper.upper(), "reach")


def _design_stale(d: Designer) -> None:
    """A key whose only record is in a file written while the job was stopped, with an mtime a month
    old: the restarted file source never reads it (older than its maxFileAge behind the newest file)."""
    p, src, b = d.p, d.p.sources[0], d.p.restart_after
    design = f"never read: its only record is in a file a month old, written while the job was stopped (batch {b} on)"
    st = p.static
    if st is not None and st.adds:  # the key is a group of the table: a looked-up value of its own
        g = d.new_key(design, st.produces if p.shape == "dedup" else None)
        value = f"{st.lookup[:2]}-{len(st.rows) + 50:02d}"
        st.rows.append({st.lookup: value, st.produces: g})
        d.rec(src, b, g, "stale", lookup=value)
        return
    k = d.new_key(design, src.cols["key"] if p.shape == "dedup" else None)
    if st is not None:  # a semi or anti join keeps it
        d.rec(src, b, k, "stale", lookup=f"{st.lookup[:2]}-01")
    else:
        d.rec(src, b, k, "stale")


def _design_static(d: Designer) -> None:
    """Keys are the groups the static table gives (regions of countries); a few asked by the looked-up column."""
    p, srcs, last, mid = d.p, d.p.sources, d.n - 1, d.n // 2
    assert p.static is not None
    st = p.static
    d.prefix = st.produces
    ask_lookup = st.lookup
    ask_group = st.produces if p.shape == "dedup" else None
    table: list[dict[str, Any]] = []
    n_lookup = 0

    def group(design: str, n_values: int = 1) -> tuple[str, list[str]]:
        nonlocal n_lookup
        g = d.new_key(design, ask_group)
        values = []
        for _ in range(n_values):
            n_lookup += 1
            v = f"{st.lookup[:2]}-{n_lookup:02d}"
            table.append({st.lookup: v, st.produces: g})
            values.append(v)
        return g, values

    steady, sv = group("steady: records of two looked-up values in every batch", 2)
    for b in range(d.n):
        for i, s in enumerate(srcs):
            d.rec(s, b, steady, lookup=sv[(b + i) % 2])
    g, gv = group("written: early records of each looked-up value", 2)
    for i, s in enumerate(srcs):
        d.rec(s, 1, g, lookup=gv[i % 2])
    if p.shape != "dedup":
        g, gv = group("waiting: a record in the last batch")
        d.rec(srcs[-1], last, g, "wait", lookup=gv[0])
    g, gv = group("late: its only record is behind the watermark")
    d.rec(srcs[0], mid + 1, g, "late", d.late_minute(mid + 1), lookup=gv[0])
    g, gv = group("partly written: one record written, one late", 2)
    d.rec(srcs[0], 1, g, lookup=gv[0])
    d.rec(srcs[-1], mid + 2, g, "late", d.late_minute(mid + 2), lookup=gv[1])
    for i, f in enumerate(p.filters):
        src = p.source(f.source) if f.source else srcs[i % len(srcs)]
        g, gv = group(f"partly written: one record passes, one fails `{f.expr}`")
        d.rec(src, 1, g, lookup=gv[0])
        d.rec(src, 3, g, "filtered", lookup=gv[0]).values[f.column] = f.failing
    if p.dedup:
        eid = d.next_eid()
        g, gv = group("written: a duplicate of its own earlier record, dropped")
        first = d.rec(srcs[0], 2, g, eid=eid, lookup=gv[0])
        d.rec(srcs[-1], 3, g, "duplicate", minute=first.minute, eid=eid, lookup=gv[0])
    # asked by the looked-up column: a value the table lacks, a value of a written group
    miss = d.new_key(f"not in the static table ({st.kind} join): asked by {st.lookup}", ask_lookup, value=f"{st.lookup[:2]}-99")
    d.rec(srcs[0], 2, None, "static_miss" if st.kind == "inner" else "reach", lookup=miss)
    d.new_key(f"written: a {st.lookup} of a written group, asked by {st.lookup}", ask_lookup, value=gv[0] if p.dedup else sv[0])
    d.new_key("never in the input (no group of the table)", ask_group)
    st.rows = table


def _design_join(d: Designer) -> None:
    p, last, mid = d.p, d.n - 1, d.n // 2
    assert p.join is not None
    left, right = p.sources
    lo, hi = p.join["lower"], p.join["upper"]
    if p.join.get("by"):  # the window's state key is another column: ask by the join key
        d.ask = left.cols["key"]
    steady = d.new_key("steady: a matching pair in every batch")
    for b in range(d.n):
        d.rec(left, b, steady)
        d.rec(right, b, steady, minute=d.clock(b, left) + 0.5)
    k = d.new_key("matched: a pair within the time range")
    d.rec(left, 1, k)
    d.rec(right, 2, k, minute=d.clock(1, left) + 1)
    k = d.new_key("no match: a left row, no right row of its key")
    d.rec(left, 2, k, "no_match")
    k = d.new_key("no match: a right row, no left row of its key")
    d.rec(right, 2, k, "no_match")
    k = d.new_key(f"condition not met: its right row {hi + 2} minutes after the left one (range {lo}-{hi})")
    t = d.clock(2, left)
    b_far = 2 + int((hi + 2) // p.step) + 1
    d.rec(left, 2, k, "far")
    d.rec(right, b_far, k, "far", minute=t + hi + 2)
    k = d.new_key("its match late: the left row on time, the right one behind the watermark")
    d.rec(left, 2, k, "other_late")
    d.rec(right, mid + 2, k, "late", minute=min(d.clock(2, left) + 1, d.late_minute(mid + 2)))
    k = d.new_key("late: its left row behind the watermark")
    d.rec(left, mid + 1, k, "late", d.late_minute(mid + 1))
    k = d.new_key("waiting: a left row in the last batch, no match yet")
    d.rec(left, last, k, "wait")
    for f in p.filters:
        src = p.source(f.source)
        k = d.new_key(f"filtered: its {src.side} row fails `{f.expr}`, the other side's row then never matched")
        d.rec(left, 2, k, "filtered" if src is left else "other_filtered", **({f.column: f.failing} if src is left else {}))
        fails = {f.column: f.failing} if src is right else {}
        d.rec(right, 2, k, "filtered" if src is right else "other_filtered", minute=d.clock(2, left) + 1, **fails)
    if p.dedup:
        src = left if p.dedup["side"] == "left" else right
        other = right if src is left else left
        eid = d.next_eid()
        k = d.new_key(f"matched: its {src.side} row sent twice, the second dropped as a duplicate")
        first = d.rec(src, 1, k, eid=eid, minute=d.clock(1, left))
        d.rec(src, 2, k, "duplicate", minute=first.minute, eid=eid)
        d.rec(other, 1, k, minute=d.clock(1, left) + (1 if other is right else -0))
    d.new_key("never in the input")


# --------------------------------------------------------------------------- rows


def rows_of(d: Designer) -> tuple[list[dict[str, list[dict[str, Any]]]], list[dict[str, Any]]]:
    """Each record as its source's row: ids, the passing value of every filter, its key's own power of two."""
    p = d.p
    passing = {f.column: f.passing for f in p.filters if f.column != "key"}
    if any(f.shape == "and_or" for f in p.filters):
        passing["tag"] = PASS_TAG
    bits: dict[str, int] = {}
    batches: list[dict[str, list[dict[str, Any]]]] = [{s.name: [] for s in p.sources} for _ in range(d.n)]
    for i, r in enumerate(d.recs):
        src = p.source(r.source)
        r.rid = f"r{p.seed:04d}-{i:03d}"
        grouped = p.static is not None and p.static.adds  # the group is the table's column
        group = r.key if not grouped else (r.key or f"?{r.values.get('lookup')}")
        bit = bits.get(group, 0)
        bits[group] = bit + 1
        values: dict[str, Any] = {
            "rid": r.rid,
            "key": _key_value(p, r.key) if not grouped else (i if p.int_keys else f"{d.theme_prefix}-{i:03d}"),
            "eid": r.values.get("eid") or d.next_eid(),
            "time": r.minute,
            "tag": passing.get("tag", PASS_TAG),
            "flag": passing.get("flag", True),
            "num": 1 << bit,
        }
        if "lookup" in src.cols:
            values["lookup"] = group_of(p, r.key) if p.join else r.values.get("lookup")
        values.update({k: v for k, v in r.values.items() if k != "eid"})
        if r.intent == "filtered" and "num" in r.values:
            values["num"] = r.values["num"]
        row = {src.cols[role]: v for role, v in values.items() if role in src.cols}
        row["_intent"] = r.intent
        batches[r.batch][src.name].append(row)
    return batches, d.keys


def _key_value(p: Pipeline, key: str | None) -> Any:
    """A designed key as its records hold it: a number where the key columns are numbers."""
    return int(key) if p.int_keys and key is not None else key
