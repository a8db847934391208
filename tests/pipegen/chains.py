"""Generated chains: 2-4 streaming queries, each reading the table the one before it writes (Parquet,
JSON or CSV file sinks; the last may write through foreachBatch), with keys designed to be lost at
each hop; run for real, then State Lens's answer for each key across the chain compared with what
Spark wrote, end to end and query by query.

Every query filters, sets a watermark and drops duplicates (of ``eid`` within the watermark, or of a
record re-sent: ``rid`` and its time); the last may count each user's events in 5-minute windows
instead (its window flattened to columns). Watermark delays shrink downstream: a record on time at
one hop can be late at the next. Each run drops one input file and runs every query to the end of
its input (availableNow), upstream first; the last run stops before the last query: it lags.

The truth is Spark's only: the input files, each table's files as its sink log lists them, and the
files each query's source log says it read, copied as they were (``checked/``: what State Lens is
asked about); then the run goes on (``run/``: a last file far ahead in time, every query to the end).
A key in the last table is written; a key that reached a table and is in no file the next query read
is waiting there (not read yet); else the first query that read the key and wrote none of it is where
it stopped: waiting in its state if its table holds the key once the run went on, else lost there."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
BASE_MTIME = 1_767_225_600
DDL = "rid STRING, user STRING, eid STRING, ts TIMESTAMP, num BIGINT"
FORMATS = ("parquet", "json", "csv")
NEVER, WRITTEN, NOT_READ, WAITING, LOST = "never_in_input", "written", "not_read_yet", "waiting", "lost"


@dataclass
class Hop:
    op: str  # dedup_eid | dedup_rid | window_count (the last only)
    delay: int  # its watermark delay, minutes
    fmt: str  # the table it writes: parquet | json | csv
    foreach: bool = False  # written by foreachBatch (the last only: no sink log to link a next hop by)
    rename: bool = False  # writes the user column as ``customer`` (not the last): the queries after it read that


@dataclass
class Chain:
    seed: int
    hops: list[Hop]
    files: list[list[dict[str, Any]]]  # the input files' records, one file per run
    designs: dict[str, str] = field(default_factory=dict)  # user -> what was designed for it

    @property
    def name(self) -> str:
        return f"chain-{self.seed:04d}"

    def parts(self) -> str:
        return " -> ".join(
            f"{h.op}[{h.delay}m]>{'user AS customer>' if h.rename else ''}{'foreachBatch ' if h.foreach else ''}{h.fmt}"
            for h in self.hops
        )

    def user_column(self, i: int) -> str:
        """The user column query ``i`` reads: ``customer`` after a query renamed it."""
        return "customer" if any(h.rename for h in self.hops[:i]) else "user"

    def key_field(self) -> str:
        """``--key-field`` across the chain: ``user``, and each query reading the renamed column."""
        renamed = [f"q{i}=customer" for i in range(len(self.hops)) if self.user_column(i) == "customer"]
        return ",".join(["user", *renamed])

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @staticmethod
    def from_json(text: str) -> Chain:
        d = json.loads(text)
        return Chain(d["seed"], [Hop(**h) for h in d["hops"]], d["files"], d["designs"])


def chain(seed: int) -> Chain:
    """The chain a seed makes: its queries and its input files, keys designed for each hop."""
    rnd = random.Random(seed)
    n = rnd.choice((2, 3, 3, 4))
    delays = sorted(rnd.sample(range(4, 40, 3), n), reverse=True)  # shrinking downstream
    hops = [Hop(rnd.choice(("dedup_eid", "dedup_rid")), delays[i], rnd.choice(FORMATS)) for i in range(n)]
    if rnd.random() < 0.5:
        hops[-1].op = "window_count"
    hops[-1].foreach = rnd.random() < 0.3
    if rnd.random() < 0.3:
        hops[rnd.randrange(n - 1)].rename = True
    runs = rnd.choice((4, 5))
    files: list[list[dict[str, Any]]] = [[] for _ in range(runs)]
    designs: dict[str, str] = {}
    seq = iter(range(10_000))

    def rec(user: str, minute: float, run: int, eid: str | None = None, num: int = 1, rid: str | None = None) -> dict[str, Any]:
        r = {"rid": rid or f"r{next(seq)}", "user": user, "eid": eid or f"e{next(seq)}", "ts": minute, "num": num}
        files[run].append(r)
        return r

    # the clock: each file's events 10 minutes after the one before
    for run in range(runs):
        for j in range(3):
            rec(f"u{run}{j}", 10 * run + 2 * j + rnd.random(), run)
            designs.setdefault(f"u{run}{j}", "plain events" if run < runs - 1 else "in the last file")
    for i, h in enumerate(hops):
        run = rnd.randrange(1, runs - 1)
        rec(f"filt{i}", 10 * run + 1, run, num=100 + i)
        designs[f"filt{i}"] = f"filtered out by query {i} (num = {100 + i})"
        if i > 0:  # behind the newest event before its file by less than query i-1's delay, more than query i's
            late_run = rnd.randrange(1, runs - 1)  # the file before it ends between minutes 10r-6 and 10r-5
            rec(f"late{i}", 10 * late_run - 5.5 - (hops[i - 1].delay + h.delay) / 2, late_run)
            designs[f"late{i}"] = f"behind query {i}'s watermark ({h.delay} min), not query {i - 1}'s ({hops[i - 1].delay} min)"
    first = files[0][0]
    dup_run = rnd.randrange(1, runs - 1)
    if hops[0].op == "dedup_rid":  # the first record re-sent (its rid and time), under a user of its own
        rec("dupe", first["ts"], dup_run, eid=first["eid"], rid=first["rid"])
    else:  # another record with the first one's eid, within the watermark
        rec("dupe", first["ts"] + 0.5, dup_run, eid=first["eid"])
    designs["dupe"] = "a duplicate of the first record (query 0 drops it)"
    designs["nobody"] = "in no input file"
    return Chain(seed, hops, files, designs)


def when(minute: float) -> str:
    return (T0 + dt.timedelta(minutes=minute)).isoformat()


def _query(spark: Any, c: Chain, i: int, root: Path) -> Any:
    from pyspark.sql import functions as F

    h = c.hops[i]
    user = c.user_column(i)
    reader = spark.readStream.schema(DDL.replace("user STRING", f"{user} STRING"))
    if i == 0:
        df = reader.json(str(root / "inputs" / "events"))
    else:
        up = c.hops[i - 1]
        if up.fmt == "csv":
            reader = reader.option("header", "true")
        df = getattr(reader, up.fmt)(str(root / "tables" / f"t{i - 1}"))
    df = df.where(f"num != {100 + i}").withWatermark("ts", f"{h.delay} minutes")
    if h.op == "dedup_eid":
        df = df.dropDuplicatesWithinWatermark(["eid"])
    elif h.op == "dedup_rid":
        df = df.dropDuplicates(["rid", "ts"])
    else:
        w = df.groupBy(user, F.window("ts", "5 minutes")).count()
        df = w.select(user, F.col("window.start").alias("wstart"), F.col("window.end").alias("wend"), "count")
    return df.withColumnRenamed(user, "customer") if h.rename else df


def _session(c: Chain, event_log: Path) -> Any:
    from pyspark.sql import SparkSession

    event_log.mkdir(parents=True)
    builder = SparkSession.builder.master("local[2]").appName(c.name)
    for k, v in {
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_log.as_uri(),
    }.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _input(events: Path, run: int, rows: list[dict[str, Any]]) -> None:
    """The run's input file (its mtime in run order: the file source reads by it)."""
    events.mkdir(parents=True, exist_ok=True)
    path = events / f"part-{run:03d}.json"
    path.write_text("".join(json.dumps({**r, "ts": when(r["ts"])}) + "\n" for r in rows))
    os.utime(path, (BASE_MTIME + 60 * run, BASE_MTIME + 60 * run))


def run_in_process(c: Chain, dest: Path) -> None:
    """Runs the chain in a Spark application of this process (``dest/run``: inputs, checkpoints, tables,
    its event log), copies it as it then is to ``dest/checked`` (what State Lens is asked about), then
    continues the run in a second application: a last file far ahead in time, every query to the end of
    its input. What was waiting in a query's state is written then; what was lost never is."""
    if dest.exists():
        shutil.rmtree(dest)
    run_dir = dest / "run"
    events = run_dir / "inputs" / "events"
    spark = _session(c, run_dir / "event_log")
    try:
        for run, rows in enumerate(c.files):
            _input(events, run, rows)
            last = len(c.hops) - (1 if run == len(c.files) - 1 else 0)  # the last run: the last query lags
            for i in range(last):
                _run(spark, c, i, run_dir)
    finally:
        spark.stop()  # its event log complete before the copy
    shutil.copytree(run_dir, dest / "checked")
    spark = _session(c, run_dir / "event_log_continued")
    try:
        end = 10 * len(c.files) + 240  # minutes: past every window and watermark delay
        _input(events, len(c.files), [{"rid": "r-flush", "user": "flush", "eid": "e-flush", "ts": end, "num": 1}])
        for i in range(len(c.hops)):
            _run(spark, c, i, run_dir)
    finally:
        spark.stop()
    (dest / "chain.json").write_text(c.to_json())


def _run(spark: Any, c: Chain, i: int, root: Path) -> None:
    h = c.hops[i]
    df = _query(spark, c, i, root)
    table = root / "tables" / f"t{i}"
    w = df.writeStream.outputMode("append").option("checkpointLocation", str(root / "checkpoints" / f"q{i}"))
    if h.foreach:
        fmt = h.fmt

        def write(batch: Any, batch_id: int) -> None:
            out = batch.write.mode("append")
            getattr(out.option("header", "true") if fmt == "csv" else out, fmt)(str(table / f"batch={batch_id}"))

        w = w.foreachBatch(write)
    else:
        w = w.format(h.fmt).option("path", str(table))
        if h.fmt == "csv":
            w = w.option("header", "true")
    q = w.trigger(availableNow=True).start()
    q.awaitTermination()
    if q.exception():
        raise RuntimeError(str(q.exception()))


# ---- the truth: Spark's files and logs only ----


def _users_in(path: Path, fmt: str) -> set[str]:
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    if path.stat().st_size == 0:
        return set()
    t = pq.read_table(path) if fmt == "parquet" else pcsv.read_csv(path) if fmt == "csv" else pjson.read_json(path)
    column = next((c for c in ("user", "customer") if c in t.column_names), None)
    return {str(u) for u in t.column(column).to_pylist()} if column else set()


def _log(folder: Path) -> dict[int, list[str]]:
    """A log folder (a sink's ``_spark_metadata``, a source's ``sources/0``): batch -> the file names it lists
    (a compacted entry lists the batches before it too: each file under the newest entry naming it)."""
    out: dict[int, list[str]] = {}
    for f in sorted((p for p in folder.iterdir() if p.name.split(".")[0].isdigit()), key=lambda p: int(p.name.split(".")[0])):
        for line in f.read_text().splitlines()[1:]:
            e = json.loads(line)
            if e.get("action", "add") == "add":
                out.setdefault(int(e.get("batchId", f.name.split(".")[0])), []).append(e["path"].rsplit("/", 1)[-1])
    return out


@dataclass
class ChainTruth:
    chain: Chain
    written: list[set[str]]  # per query: the users in its table's files
    read: list[set[str]]  # per query: the users in the files its source log says it read
    upstream: list[set[str]]  # per query: the users in the files before it (the input; the table before)
    continued: list[set[str]]  # per query: the users in its table once the run continued past every window


def _table_users(table: Path, h: Hop) -> set[str]:
    """The users in a table's files: those its sink log lists (a foreachBatch's batch folders)."""
    if h.foreach:
        files = [p for p in table.glob("batch=*/*") if p.is_file() and not p.name.startswith(("_", "."))]
    else:
        files = [table / n for ns in _log(table / "_spark_metadata").values() for n in ns] if table.exists() else []
    return set().union(*(_users_in(p, h.fmt) for p in files))


def truth(dest: Path) -> ChainTruth:
    c = Chain.from_json((dest / "chain.json").read_text())
    written, read, upstream, continued = [], [], [], []
    checked = dest / "checked"
    for i, h in enumerate(c.hops):
        written.append(_table_users(checked / "tables" / f"t{i}", h))
        continued.append(_table_users(dest / "run" / "tables" / f"t{i}", h))
        folder = checked / "inputs" / "events" if i == 0 else checked / "tables" / f"t{i - 1}"
        fmt = "json" if i == 0 else c.hops[i - 1].fmt
        log = checked / "checkpoints" / f"q{i}" / "sources" / "0"
        names = {n for ns in _log(log).values() for n in ns} if log.exists() else set()
        read.append(set().union(*(_users_in(folder / n, fmt) for n in names)))
        upstream.append({str(r["user"]) for rows in c.files for r in rows} if i == 0 else written[i - 1])
    return ChainTruth(c, written, read, upstream, continued)


def expected(t: ChainTruth, user: str) -> tuple[str, int]:
    """The key's fate at the chain's end, from the files: (``written`` | ``never_in_input`` |
    ``not_read_yet`` | ``waiting`` | ``lost``, the query it is told at). A key a query read and wrote
    none of waits in its state when that query's table holds it once the run went on, else was lost there."""
    last = len(t.chain.hops) - 1
    if user in t.written[last]:
        return WRITTEN, last
    if user not in t.upstream[0]:
        return NEVER, 0
    for i in range(last + 1):
        if user in t.upstream[i] and user not in t.read[i]:
            return NOT_READ, i
        if user in t.read[i] and user not in t.written[i]:
            return (WAITING if user in t.continued[i] else LOST), i
    return LOST, last


# ---- the differential ----


@dataclass
class ChainCheck:
    chain: str
    key: str
    design: str
    scope: str  # end | q<i> (one query's own answer)
    verdict: str  # right | wrong | limit | crashed
    truth: str
    got: str

    def line(self) -> str:
        return f"{self.chain} {self.key!r} [{self.design}] {self.scope}: {self.verdict}: truth {self.truth}; got {self.got}"


def check(dest: Path, event_log: bool = True, key_field: str | None = None) -> list[ChainCheck]:
    """Each designed key across the chain (State Lens, native) against the files, end to end and per query
    (``key_field``: the chain's own, naming the renamed column per query, by default)."""
    import statelens

    t = truth(dest)
    c = t.chain
    users = sorted(c.designs)
    try:
        checked = dest / "checked"  # a copy: its tables and input where they are now
        answers = statelens.why_missing_across(
            str(checked / "checkpoints"),
            *users,
            key_field=key_field or c.key_field(),
            event_log=str(checked / "event_log") if event_log else None,
            data_root=str(checked / "tables"),
            input_root=str(checked / "inputs"),
        )
    except Exception as e:  # a crash is scored, never hidden
        return [ChainCheck(c.name, u, c.designs[u], "end", "crashed", "", f"{type(e).__name__}: {e}") for u in users]
    out: list[ChainCheck] = []
    for a in answers:
        fate, at = expected(t, a.key)
        got_q = (a.cause_at or {}).get("query")
        got = f"{a.outcome}/{a.cause} at {got_q}"
        want = f"{fate} at q{at}"
        if fate == WRITTEN:  # what the last table holds is written, whatever else is said of the key's other records
            verdict = "right" if a.outcome in ("written", "partly_written") and got_q == f"q{at}" else "wrong"
        elif a.outcome == "unknown" or a.cause == "unknown":  # said so, with why: a named limit
            verdict = "limit"
        elif fate == NEVER:
            verdict = "right" if a.outcome == NEVER else "wrong"
        elif fate == NOT_READ:
            verdict = "right" if (a.cause, got_q) == (NOT_READ, f"q{at}") else "wrong"
        else:  # waiting in that query's state, or lost there
            verdict = "right" if (a.outcome, got_q) == (fate, f"q{at}") else "wrong"
        out.append(ChainCheck(c.name, a.key, c.designs[a.key], "end", verdict, want, got))
        for h in a.hops:  # each query's own answer against its own input and table
            i = int(h.query[1:])
            if a.key not in t.read[i]:
                want_h, ok_h = "not in what it read", h.outcome == NEVER
            elif a.key in t.written[i]:
                want_h, ok_h = "in its table", h.outcome in ("written", "partly_written")
            elif a.key in t.continued[i]:
                want_h, ok_h = "read, waiting in its state", h.outcome == WAITING
            else:
                want_h, ok_h = "read, lost there", h.outcome == LOST
            v = "limit" if h.outcome == "unknown" and a.key not in t.written[i] else ("right" if ok_h else "wrong")
            out.append(ChainCheck(c.name, a.key, c.designs[a.key], h.query, v, want_h, f"{h.outcome}/{h.cause}"))
    return out


# ---- the wide run ----


def parts(c: Chain) -> list[str]:
    """What a chain is made of, one label each (the wide run's table rows)."""
    return [
        f"queries:{len(c.hops)}",
        *sorted({f"table:{h.fmt}" for h in c.hops[:-1]}),
        f"last writes:{'foreachBatch ' if c.hops[-1].foreach else ''}{c.hops[-1].fmt}",
        f"last query:{c.hops[-1].op}",
        *(["renamed key column"] if any(h.rename for h in c.hops) else []),
    ]


def wide(seeds: list[int], work: Path, table_file: Path | None = None) -> int:
    """Generates, runs and checks each seed (a Spark application each), then prints right / wrong /
    crashed / named limit per part, with and without the event log; 1 when any answer is wrong."""
    import subprocess
    import sys

    rows: list[tuple[list[str], ChainCheck]] = []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    for seed in seeds:
        c = chain(seed)
        dest = work / c.name
        if not (dest / "chain.json").exists():
            r = subprocess.run(
                [sys.executable, "-m", "pipegen", "chain", str(seed), str(dest)], capture_output=True, text=True, env=env
            )
            if r.returncode != 0:
                print(f"{c.name}: NOT RUN: {(r.stderr.strip().splitlines() or ['?'])[-1]}", flush=True)
                continue
        for log in (True, False):
            for k in check(dest, event_log=log):
                rows.append(([*parts(c), f"event log:{'yes' if log else 'no'}"], k))
                if k.verdict in ("wrong", "crashed"):
                    print("  " + k.line(), flush=True)
        print(f"{c.name}: {c.parts()}", flush=True)
    labels = ["all", *sorted({p for ps, _ in rows for p in ps})]
    lines = ["| part | chains | checks | right | wrong | crashed | named limit |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label in labels:
        picked = [k for ps, k in rows if label == "all" or label in ps]
        n = len({k.chain for k in picked})
        count = {v: sum(1 for k in picked if k.verdict == v) for v in ("right", "wrong", "crashed", "limit")}
        lines.append(
            f"| {label} | {n} | {len(picked)} | {count['right']} | {count['wrong']} | {count['crashed']} | {count['limit']} |"
        )
    text = "\n".join(lines)
    print(text)
    if table_file:
        table_file.write_text(text + "\n")
    return 1 if any(k.verdict in ("wrong", "crashed") for _, k in rows) else 0
