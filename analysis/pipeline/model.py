"""A pipeline: the queries under a root and the hops between them, each link as Spark logged it.

A hop is a table one query writes and a later query reads. Spark logs both ends of it: the upstream
file sink's ``_spark_metadata/N`` lists the files its batch N wrote, the downstream file source's
``sources/<i>/M`` the files its batch M read. A file named in both is a link: downstream batch M read
what upstream batch N wrote (the batch numbers do not line up). Nothing here reads storage: the
logs come in as facts (``spark_io.gather.pipeline``).

Spark Declarative Pipelines keep every flow's checkpoint at
``_checkpoints/<catalog>/<schema>/<table>/<flow>/<version>/`` under the pipeline's storage root; a
full refresh of a table starts its flows at the next version, and the older ones are superseded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SDP_FOLDER = "_checkpoints"


@dataclass(frozen=True)
class Flow:
    """A Declarative Pipeline's flow, told by where its checkpoint sits."""

    catalog: str
    schema: str
    table: str
    flow: str
    version: int
    current: bool = True  # False: a full refresh started a newer version of this flow

    @property
    def name(self) -> str:
        """The table (``schema.table`` outside the default schema), with ``/flow`` when the flow is not
        named after its table, and ``@vN`` when a newer version supersedes it: ``silver``, ``gold@v0``."""
        table = self.table if self.schema == "default" else f"{self.schema}.{self.table}"
        base = table + ("" if self.flow == self.table else f"/{self.flow}")
        return base if self.current else f"{base}@v{self.version}"


def flow_at(parts: tuple[str, ...]) -> Flow | None:
    """The flow a checkpoint's folder names, from its path's parts (``..., _checkpoints, catalog,
    schema, table, flow, version``); None when it is not laid out so."""
    if len(parts) < 6 or parts[-6] != SDP_FOLDER or not parts[-1].isdigit():
        return None
    catalog, schema, table, flow, version = parts[-5:]
    return Flow(catalog, schema, table, flow, int(version))


def storage_root(path: str) -> str:
    """A Declarative Pipeline flow's storage root: its checkpoint's path above ``_checkpoints``."""
    return path.rstrip("/").rsplit("/", 6)[0]


def with_currency(flows: Iterable[Flow]) -> dict[Flow, Flow]:
    """Each flow -> itself, marked current or superseded (the highest version of a table's flow is current)."""
    flows = list(flows)
    newest: dict[tuple[str, str, str, str], int] = {}
    for f in flows:
        k = (f.catalog, f.schema, f.table, f.flow)
        newest[k] = max(newest.get(k, f.version), f.version)
    return {
        f: Flow(f.catalog, f.schema, f.table, f.flow, f.version, f.version == newest[(f.catalog, f.schema, f.table, f.flow)])
        for f in flows
    }


@dataclass(frozen=True)
class SinkLog:
    """A file sink's log: each file it lists -> the batch that wrote it (None: a compacted log whose
    own batch entries are gone), as logged (``folder``: where it was read from now)."""

    folder: str
    logged: str  # the folder its entries name (``norm``): where the writer wrote it
    files: Mapping[str, int | None]  # each file as logged (``norm``) -> the batch that wrote it
    batches: tuple[int, ...]  # the batches the log has an entry for (written files or not)


@dataclass(frozen=True)
class PipelineQuery:
    """One query of the pipeline: its checkpoint, what it reads and writes."""

    name: str  # the checkpoint's folder relative to the root, or the Declarative Pipeline flow's name
    checkpoint: str
    flow: Flow | None = None
    # source index -> (the source's name, the folder its files were logged in)
    sources: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    sink: str | None = None  # the table folder it writes (as found now)
    sink_how: str | None = None  # how that was told (a Declarative Pipeline's table, the file sink's timing)
    last_batch: int | None = None
    watermark_ms: int | None = None
    state_bytes: int = 0
    problem: str | None = None  # the doctor's worst problem, or why the checkpoint cannot be read

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkpoint": self.checkpoint,
            "sdp": None
            if self.flow is None
            else {
                "catalog": self.flow.catalog,
                "schema": self.flow.schema,
                "table": self.flow.table,
                "flow": self.flow.flow,
                "version": self.flow.version,
                "current": self.flow.current,
            },
            "sources": [{"index": i, "name": n, "folder": f} for i, (n, f) in sorted(self.sources.items())],
            "sink": self.sink,
            "sink_how": self.sink_how,
            "last_batch": self.last_batch,
            "watermark_ms": self.watermark_ms,
            "state_bytes": self.state_bytes,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class Hop:
    """A table between two queries: which upstream batches each downstream batch read."""

    upstream: str
    downstream: str
    table: str  # the table's folder
    source_index: int  # the downstream query's source that reads it
    read: Mapping[int, tuple[int, ...]]  # downstream batch -> the upstream batches whose files it read
    unread: tuple[int, ...]  # upstream batches that wrote files after the newest one read (the lag)
    written: Mapping[str, int | None] = field(default_factory=dict, repr=False)  # the table's files (``norm``) -> upstream batch

    def to_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "downstream": self.downstream,
            "table": self.table,
            "source_index": self.source_index,
            "read": [{"batch_id": m, "upstream_batches": list(ns)} for m, ns in sorted(self.read.items())],
            "unread_upstream_batches": list(self.unread),
        }


@dataclass(frozen=True)
class Pipeline:
    """The queries under a root and the hops between them; queries sharing no hop are separate
    pipelines (``groups``)."""

    root: str
    queries: tuple[PipelineQuery, ...]
    hops: tuple[Hop, ...]
    notes: tuple[str, ...] = ()  # what could not be linked, and why

    def query(self, name: str) -> PipelineQuery:
        for q in self.queries:
            if q.name == name:
                return q
        raise KeyError(name)

    def order(self) -> list[str]:
        """The queries upstream first (a query before every query that reads its table), ties by name."""
        ups: dict[str, set[str]] = {q.name: set() for q in self.queries}
        for h in self.hops:
            ups[h.downstream].add(h.upstream)
        done: list[str] = []
        left = dict(ups)
        while left:
            ready = sorted(n for n, u in left.items() if not (u - set(done)))
            if not ready:  # a cycle (a query reading its own table): the rest by name
                ready = sorted(left)
            done.append(ready[0])
            del left[ready[0]]
        return done

    def groups(self) -> list[list[str]]:
        """The separate pipelines: queries linked by hops, each group upstream first."""
        parent = {q.name: q.name for q in self.queries}

        def top(n: str) -> str:
            while parent[n] != n:
                parent[n] = parent[parent[n]]
                n = parent[n]
            return n

        for h in self.hops:
            parent[top(h.upstream)] = top(h.downstream)
        order = self.order()
        by_top: dict[str, list[str]] = {}
        for n in order:
            by_top.setdefault(top(n), []).append(n)
        return sorted(by_top.values(), key=lambda g: order.index(g[0]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "queries": [self.query(n).to_dict() for n in self.order()],
            "hops": [h.to_dict() for h in self.hops],
            "pipelines": self.groups(),
            "notes": list(self.notes),
        }


def key_fields(text: str) -> dict[str, str]:
    """``user`` or ``user,gold=customer``: the keys' column, then the queries that name it otherwise ->
    their column ({"": "user", "gold": "customer"}). A query's name may hold ``=`` only before its last one."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if part:
            query, _, field = part.rpartition("=")
            out[query.strip()] = field.strip()
    return out


def norm(uri: str) -> str:
    """A logged path in one spelling: ``file:/a``, ``file:///a`` and ``/a`` alike."""
    u = uri.strip()
    if u.startswith("file:"):
        u = "/" + u[len("file:") :].lstrip("/")
    return u.rstrip("/")


def parent(uri: str) -> str:
    return norm(uri).rsplit("/", 1)[0]


def link(
    reads: Mapping[str, Mapping[int, Mapping[int, list[str]]]],
    writers: Mapping[str, tuple[str, SinkLog]],
) -> list[Hop]:
    """The hops: ``reads`` is query -> source index -> batch -> the files it read (as logged);
    ``writers`` is a table's folder as its sink log names it (``norm``) -> (the query writing it, its
    sink log). Both logs hold the paths of the machine that wrote them, so a file is matched as
    logged, wherever the table is now."""
    hops = []
    for downstream, sources in reads.items():
        for index, batches in sources.items():
            by_table: dict[str, dict[int, set[int]]] = {}
            for batch, files in batches.items():
                for uri in files:
                    table = parent(uri)
                    if table not in writers or writers[table][0] == downstream:
                        continue
                    log = writers[table][1]
                    if norm(uri) not in log.files:
                        continue  # a file of the table's earlier life (before a full refresh): not in this log
                    written = log.files[norm(uri)]
                    by_table.setdefault(table, {}).setdefault(batch, set()).update([written] if written is not None else [])
            for table, read in by_table.items():
                upstream, log = writers[table]
                seen = max((n for ns in read.values() for n in ns), default=-1)
                wrote = sorted({b for b in log.files.values() if b is not None})
                hops.append(
                    Hop(
                        upstream,
                        downstream,
                        log.folder,
                        index,
                        {m: tuple(sorted(ns)) for m, ns in sorted(read.items())},
                        tuple(b for b in wrote if b > seen),
                        log.files,
                    )
                )
    return sorted(hops, key=lambda h: (h.upstream, h.downstream, h.source_index))
