"""A generated pipeline as data: its sources, its parts in order, its store, its sink, its input
batches and the keys designed for each fate. Written beside the run as ``pipeline.json``: the
pipeline is rebuilt from it (``build``), and the truth is derived against it (``truth``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDERS = ("hdfs", "rocksdb", "rocksdb_changelog")
# the columns every source record has, by role (each pipeline names them in its own words)
ROLES = ("rid", "key", "eid", "time", "tag", "flag", "num", "lookup")
TYPES = {
    "rid": "STRING",
    "key": "STRING",
    "eid": "STRING",
    "time": "TIMESTAMP",
    "tag": "STRING",
    "flag": "BOOLEAN",
    "num": "BIGINT",
    "lookup": "STRING",
}


# how a query makes its event time of a number since the epoch, and that number's units a second
EPOCH_TIMES = {
    "seconds": ("timestamp_seconds({})", 1),
    "millis": ("timestamp_millis({})", 1000),
    "divided": ("CAST({} / 1000 AS TIMESTAMP)", 1000),  # (col('ms') / 1000).cast('timestamp')
}


@dataclass
class Source:
    name: str  # its folder under inputs/
    fmt: str  # json | csv | parquet
    delay: int  # its watermark delay, minutes
    cols: dict[str, str]  # role -> column name
    side: str = ""  # left | right in a stream-stream join
    index: int = 0  # its offset in the clock (seconds: 20 x index)
    key_type: str = "STRING"  # its key column's type: STRING | BIGINT (a user id as a number)
    # its time a number since the epoch the query makes the event time of (EPOCH_TIMES); "": a TIMESTAMP
    time_unit: str = ""

    def ddl(self) -> str:
        def kind(r: str) -> str:
            return self.key_type if r == "key" else "BIGINT" if r == "time" and self.time_unit else TYPES[r]

        return ", ".join(f"{self.cols[r]} {kind(r)}" for r in ROLES if r in self.cols)

    def epoch_number(self, t: dt.datetime) -> int:
        """The number its file holds for the time ``t`` (``time_unit``)."""
        return round(t.timestamp() * EPOCH_TIMES[self.time_unit][1])

    def event_time(self) -> str:
        """The SQL that makes the time column's event time of its number (``time_unit``)."""
        return EPOCH_TIMES[self.time_unit][0].format(self.cols["time"])


@dataclass
class Filter:
    expr: str  # SQL, as written in the query
    shape: str  # the template's name
    column: str  # the role it tests
    passing: Any  # a value of that role that passes
    failing: Any  # one that does not
    source: str = ""  # the source it applies to before the union or join ("": after)


@dataclass
class Static:
    """A stream-static join: each record's ``lookup`` column looked up in a static table."""

    name: str  # its folder under static/
    fmt: str
    # inner | left_outer | right_outer (the table on the left, the stream on the right) | left_semi |
    # left_anti (the table filters the stream: keeps the rows it holds, or those it lacks)
    kind: str
    lookup: str  # the column both share
    produces: str  # the column the table adds (the group key downstream; not with a semi or anti join)
    rows: list[dict[str, Any]]

    @property
    def adds(self) -> bool:
        """The join adds the table's column to the stream's rows (not a semi or anti join's)."""
        return self.kind not in ("left_semi", "left_anti")


def group_of(p: Pipeline, key: Any) -> Any:
    """The group a join key's records fall in, where the window after the join groups by another
    column of the left side (``join["by"]``): a value of its own per join key."""
    if key is None or not (p.join and p.join.get("by")):
        return key
    return f"{p.join['by'][:1]}-{key}"


# fields a pipeline.json holds only where they differ from these (older readers load the rest)
OPTIONAL: dict[str, Any] = {"clean_source": False, "stale_file": False, "python": ""}
STALE_AGE = 30 * 86_400  # seconds: a stale file's mtime behind the others' (past the file source's maxFileAge, 7 days)


@dataclass
class Pipeline:
    seed: int
    shape: str  # agg | dedup | join | function | rollup
    sources: list[Source]
    provider: str  # one of PROVIDERS
    sink_fmt: str  # parquet | json | csv
    partitions: int
    step: int  # event-time minutes between batches
    name: str = ""  # its folder: seed-NNNN, or a named shape's name
    filters: list[Filter] = field(default_factory=list)
    rename: dict[str, str] = field(default_factory=dict)  # role -> its new column name (a projection before the state)
    rename_first: bool = False  # the projection comes before the filters after the union (they name the new columns)
    static: Static | None = None
    dedup: dict[str, Any] | None = None  # kind: plain | with_time | within; side
    join: dict[str, Any] | None = None  # type, lower, upper (minutes), form
    window: dict[str, Any] | None = None  # kind: tumbling | sliding | session; size, slide, gap (minutes)
    rollup: dict[str, Any] | None = None  # size: the second window over the first one's time
    function: dict[str, Any] | None = None  # kind: group_state | tws_value | tws_list | tws_map; gap (minutes)
    flatten: bool = False  # window structs written as two columns
    sink_kind: str = "file"  # file: a file sink with its _spark_metadata log | foreach: foreachBatch writes sink/batch=N/
    output: str = "append"  # the output mode: append | update (foreachBatch, one aggregation)
    watermark_policy: str = "min"  # spark.sql.streaming.multipleWatermarkPolicy (two sources): min | max
    files_per_batch: int = 1  # each source's files per batch (its maxFilesPerTrigger)
    restart_after: int = 0  # >0: the query runs in two Spark applications, the second from this batch's files on
    clean_source: bool = False  # the file source's cleanSource=archive: files read are moved under archive/
    # with restart_after: a file written before the restart with an mtime a month old (its records' intent
    # ``stale``): the restarted source never reads it (older than maxFileAge behind the newest file it saw)
    stale_file: bool = False
    # Python between the sources and the state: map_in_pandas (every row through a function, as it came)
    # | udf (the number column through a pandas UDF, the same value)
    python: str = ""
    batches: list[dict[str, list[dict[str, Any]]]] = field(default_factory=list)  # per batch: source -> rows
    keys: list[dict[str, Any]] = field(default_factory=list)  # key, ask (the column asked by, None: default), design

    @property
    def int_keys(self) -> bool:
        """The key columns are numbers (a designed key is its digits as text, as a user types it)."""
        return any(s.key_type == "BIGINT" for s in self.sources)

    def source(self, name: str) -> Source:
        return next(s for s in self.sources if s.name == name)

    def col(self, role: str, source: Source | None = None) -> str:
        """A role's column name after the projection (the name the state sees)."""
        s = source or self.sources[0]
        return self.rename.get(role, s.cols[role])

    def parts(self) -> list[str]:
        """What it is made of, as the wide run's table counts it."""
        out = [f"source:{s.fmt}" for s in self.sources]
        if len(self.sources) == 2 and self.join is None:
            out.append("union")
        if self.rename:
            out.append("rename")
        out += [f"filter:{f.shape}" for f in self.filters]
        if self.static:
            out.append(f"static:{self.static.kind}")
        if len({s.delay for s in self.sources}) > 1:
            out.append("delays:differ")
        if self.dedup:
            out.append(f"dedup:{self.dedup['kind']}")
        if self.join:
            out.append(f"join:{self.join['type']}")
            if self.join.get("by"):
                out.append("join:window by another column")
        if self.window:
            out.append(f"window:{self.window['kind']}")
        if self.rollup:
            out.append("window:chained")
        if self.function:
            out.append(f"function:{self.function['kind']}")
        n_ops = sum(x is not None for x in (self.dedup, self.join, self.window, self.rollup, self.function))
        if n_ops > 1:
            out.append("chained")
        out += [f"provider:{self.provider}", f"sink:{self.sink_fmt}"]
        if self.sink_kind != "file":
            out.append(f"sink:{self.sink_kind}")
        if self.output != "append":
            out.append(f"output:{self.output}")
        if self.watermark_policy != "min":
            out.append(f"watermark:{self.watermark_policy}")
        if self.files_per_batch != 1:
            out.append(f"files per batch:{self.files_per_batch}")
        if self.restart_after:
            out.append("restarted")
        if self.clean_source:
            out.append("source:cleanSource archive")
        if self.stale_file:
            out.append("source:file older than maxFileAge")
        if self.int_keys:
            out.append("key:integer")
        if self.python:
            out.append(f"python:{self.python}")
        if self.sources[0].time_unit:
            out.append(f"time:epoch {self.sources[0].time_unit}")
        return out

    def files(self, b: int, source: Source, rows: list[dict[str, Any]]) -> list[tuple[str, int, list[dict[str, Any]]]]:
        """A source's files of batch b: (name, its place in the order Spark reads the source's files, its
        rows); the batch's rows dealt in turn to its files."""
        stale = [r for r in rows if r.get("_intent") == "stale"]  # in a file of their own, a month old
        rows = [r for r in rows if r.get("_intent") != "stale"]
        n = self.files_per_batch
        old = [(f"part-{b:05d}-stale.{source.fmt}", -STALE_AGE, stale)] if stale else []
        if n == 1:
            return [(f"part-{b:05d}.{source.fmt}", b, rows), *old]
        return [(f"part-{b:05d}-{i}.{source.fmt}", b * n + i, rows[i::n]) for i in range(n)] + old

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        for name, default in OPTIONAL.items():  # the newest parts: left out where not drawn
            if d[name] == default:
                del d[name]
        for s in d["sources"]:
            if s["key_type"] == "STRING":
                del s["key_type"]
            if not s["time_unit"]:
                del s["time_unit"]
        return json.dumps(d, indent=1, sort_keys=True, default=str) + "\n"

    @staticmethod
    def from_json(text: str) -> Pipeline:
        d = json.loads(text)
        d["sources"] = [Source(**s) for s in d["sources"]]
        d["filters"] = [Filter(**f) for f in d["filters"]]
        d["static"] = Static(**d["static"]) if d["static"] else None
        d["name"] = d.get("name") or f"seed-{d['seed']:04d}"
        return Pipeline(**d)

    @staticmethod
    def load(folder: Path) -> Pipeline:
        return Pipeline.from_json((folder / "pipeline.json").read_text())
