"""A pipeline drawn: its queries and the tables between them as a Graphviz graph (DOT), each query's
health at a glance and how far each hop lags (the app's Pipeline page draws it)."""

from __future__ import annotations

import json

from statelens.analysis.checkpoint.health import human_bytes
from statelens.analysis.core.key_format import fmt_time
from statelens.analysis.pipeline.model import Pipeline, PipelineQuery, norm

# distinct colours: fill (light) and border (dark), by health
HEALTH_COLORS = {
    "ok": ("#e6f4ea", "#1e8e3e"),
    "problem": ("#fce8e6", "#d93025"),
    "superseded": ("#f1f3f4", "#80868b"),
}
TABLE_COLORS = ("#e8f0fe", "#1a73e8")
INPUT_COLORS = ("#fef7e0", "#b06000")
LAG_COLOR = "#e37400"


def health(q: PipelineQuery) -> str:
    """``problem`` (the doctor's worst, or the checkpoint cannot be read), ``superseded`` (a full refresh
    started a newer version of the flow) or ``ok``."""
    if q.problem:
        return "problem"
    if q.flow is not None and not q.flow.current:
        return "superseded"
    return "ok"


def health_text(q: PipelineQuery) -> str:
    """What the health says in a table: the problem, ``superseded by a full refresh``, or ``ok``."""
    return q.problem or ("superseded by a full refresh" if health(q) == "superseded" else "ok")


def batch_ranges(ns: list[int] | tuple[int, ...]) -> str:
    """Batch numbers as ranges: ``0-3, 6, 8-9`` ('' for none)."""
    out: list[str] = []
    for n in sorted(ns):
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


def _s(text: str) -> str:
    """A DOT string (JSON's escapes are DOT's: quotes and backslashes)."""
    return json.dumps(text)


def _leaf(folder: str) -> str:
    return norm(folder).rsplit("/", 1)[-1] or folder


def query_label(q: PipelineQuery) -> str:
    """A query's box: its name, last batch, watermark and state on disk."""
    batch = "no batch committed" if q.last_batch is None else f"last batch {q.last_batch}"
    lines = [q.name, batch]
    if q.watermark_ms:
        lines.append(f"watermark {fmt_time(q.watermark_ms)[11:16]} UTC")
    lines.append(f"state {human_bytes(q.state_bytes)}")
    if health(q) != "ok":
        lines.append(health(q))
    return "\n".join(lines)


def pipeline_dot(pipeline: Pipeline, group: list[str] | None = None) -> str:
    """The graph of ``group`` (names of queries; all by default), left to right: each input folder
    (a source no query of the pipeline writes), each query, each table it writes; an edge from a
    table to each query reading it says how many upstream batches it has not read yet."""
    names = group if group is not None else pipeline.order()
    queries = [pipeline.query(n) for n in names]
    lines = [
        "digraph pipeline {",
        '  rankdir=LR; bgcolor="transparent"; nodesep=0.35; ranksep=0.6;',
        '  node [fontname="Helvetica", fontsize=11, style="filled,rounded"];',
        '  edge [fontname="Helvetica", fontsize=10, color="#5f6368"];',
    ]
    tables: dict[str, str] = {}  # a table's folder (norm) -> its node id

    def table_node(folder: str, colors: tuple[str, str], shape: str, label: str) -> str:
        key = norm(folder)
        if key not in tables:
            tables[key] = f"t{len(tables)}"
            fill, line = colors
            lines.append(
                f"  {tables[key]} [shape={shape}, style=filled, fillcolor={_s(fill)}, color={_s(line)}, "
                f"label={_s(label)}, tooltip={_s(folder)}];"
            )
        return tables[key]

    ids = {q.name: f"q{i}" for i, q in enumerate(queries)}
    for q in queries:
        fill, line = HEALTH_COLORS[health(q)]
        dashed = ', style="filled,rounded,dashed"' if health(q) == "superseded" else ""
        lines.append(
            f"  {ids[q.name]} [shape=box, fillcolor={_s(fill)}, color={_s(line)}, penwidth=2{dashed}, "
            f"label={_s(query_label(q))}, tooltip={_s(q.checkpoint)}];"
        )
    hops = [h for h in pipeline.hops if h.downstream in ids and h.upstream in ids]
    for q in queries:
        if q.sink:
            t = table_node(q.sink, TABLE_COLORS, "cylinder", f"table {_leaf(q.sink)}")
            lines.append(f"  {ids[q.name]} -> {t};")
    for h in hops:
        t = table_node(h.table, TABLE_COLORS, "cylinder", f"table {_leaf(h.table)}")
        down = pipeline.query(h.downstream)
        if health(down) == "superseded":
            label, color = "no longer runs", "#80868b"
        elif h.unread:
            label, color = f"lag: {len(h.unread)} batch(es) not read", LAG_COLOR
        else:
            label, color = "caught up", "#1e8e3e"
        lines.append(f"  {t} -> {ids[h.downstream]} [label={_s(label)}, fontcolor={_s(color)}, color={_s(color)}];")
    for q in queries:
        linked = {h.source_index for h in hops if h.downstream == q.name}
        for index, (name, folder) in sorted(q.sources.items()):
            if index in linked:
                continue
            t = table_node(folder, INPUT_COLORS, "folder", f"input {_leaf(folder)}\n({name})")
            lines.append(f"  {t} -> {ids[q.name]};")
    lines.append("}")
    return "\n".join(lines)
