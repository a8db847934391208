"""Plotly figures built from analysis results (pure: data in, figure out)."""

from __future__ import annotations

import datetime as dt
import functools
import json
import zoneinfo
from typing import Any

import plotly.graph_objects as go
import pyarrow as pa
from plotly.subplots import make_subplots

from statelens.analysis.checkpoint.health import SkewReport, StoreGrowth
from statelens.analysis.checkpoint.repartition import RepartitionPreview, StorePreview
from statelens.analysis.core.model import Batch
from statelens.analysis.runs.progress import PHASES, ProgressLog
from statelens.analysis.verdicts.key_verdicts import KeyDiagnosis

EVENT_COLORS = {
    "entered state": "#1f77b4",
    "updated": "#7f7f7f",
    "matched": "#2ca02c",
    "evicted": "#d62728",
    "removed": "#d62728",
}


PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
BAR_COLOR, LINE_COLOR = PALETTE[0], PALETTE[1]
TEXT_COLOR, GRID_COLOR = "#31333F", "#E6EAF1"  # Streamlit's text and grid colours
FONT = '"Source Sans Pro", "Source Sans 3", "Helvetica Neue", Arial, sans-serif'


@functools.cache
def theme() -> go.layout.Template:
    """One look on the page and in every export (PNG, SVG, HTML, the report, the CLI): the app draws
    figures with their own template (st.plotly_chart(theme=None)), Streamlit's font and colours on
    white. Built on first use (a figure's array values make Plotly look at pandas, which an app
    thread may still be importing)."""
    axis = {"gridcolor": GRID_COLOR, "zerolinecolor": GRID_COLOR, "linecolor": GRID_COLOR, "automargin": True}
    return go.layout.Template(
        layout={
            "font": {"family": FONT, "color": TEXT_COLOR, "size": 13},
            "title": {"font": {"size": 16}, "x": 0.02},
            "colorway": PALETTE,
            "paper_bgcolor": "white",
            "plot_bgcolor": "white",
            "hoverlabel": {"font": {"family": FONT}},
            "xaxis": axis,
            "yaxis": axis,
        }
    )


DASHES = ("dash", "dot", "dashdot", "longdash")
OPEN_SYMBOLS = ("diamond-open", "square-open", "triangle-up-open", "star-open")


def finish(fig: go.Figure) -> go.Figure:
    """Every figure's last step: the theme, and lines that coincide told apart."""
    fig.update_layout(template=theme())
    _tell_apart_coinciding(fig)
    return fig


def _tell_apart_coinciding(fig: go.Figure) -> None:
    """A line drawn exactly over another hides it: each later line of a group with the same points
    on the same axes is dashed with open markers, and the legend says which series it equals
    (``meta`` names what a panel counts: "op0 right (rows = op0 left)")."""
    first: dict[tuple[Any, ...], Any] = {}
    seen: dict[tuple[Any, ...], int] = {}
    notes: dict[int, tuple[Any, list[str]]] = {}  # legend entry -> what it equals
    for t in fig.data:
        if t.type != "scatter" or t.y is None or t.x is None:
            continue
        k = (t.xaxis or "x", t.yaxis or "y", tuple(t.x), tuple(t.y))
        if k not in first:
            first[k] = t
            continue
        n = seen[k] = seen.get(k, 0) + 1
        t.line.dash = DASHES[(n - 1) % len(DASHES)]
        t.line.width = 3
        if t.mode and "markers" in t.mode:
            base = t.marker.symbol  # a marker that means something (a join side's) keeps its shape, drawn open
            is_named = isinstance(base, str) and not base.endswith("-open")
            t.marker.symbol = f"{base}-open" if is_named else OPEN_SYMBOLS[(n - 1) % len(OPEN_SYMBOLS)]
            t.marker.size = 10
        same = f"{t.meta} = {first[k].name}" if t.meta else f"= {first[k].name}"
        shown = t
        if t.showlegend is False:  # the legend entry is its group's visible trace
            shown = next((x for x in fig.data if x.legendgroup == t.legendgroup and x.showlegend is not False), t)
        notes.setdefault(id(shown), (shown, []))[1].append(same)
    for shown, same_as in notes.values():
        shown.name = f"{shown.name} ({'; '.join(same_as)})"


def count_axis(fig: go.Figure, top: float, **where: Any) -> None:
    """An axis of counts: integer ticks only (a step of 1 or 2 where the counts are small), from zero."""
    step = 1 if top <= 5 else 2 if top <= 10 else None
    ticks = {"tickmode": "linear", "tick0": 0, "dtick": step} if step else {"tickmode": "auto"}
    fig.update_yaxes(tickformat=",d", rangemode="tozero", **ticks, **where)
    if top == 0:
        fig.update_yaxes(range=[0, 1], **where)


def batch_axis(fig: go.Figure, batches: list[int], **where: Any) -> None:
    """An axis of batch ids: integer ticks only, each batch labelled while there are few enough
    to read at 1024 px (beyond, Plotly's own steps of 2, 5, 10 ... are whole numbers too)."""
    fig.update_xaxes(title_text="batch", tickformat="d", dtick=1 if len(set(batches)) <= 20 else None, **where)


def _dt(ms: int, tz: str = "UTC") -> dt.datetime:
    """A millisecond time as a datetime in ``tz`` (an IANA name; UTC by default): Plotly draws
    its wall-clock time."""
    t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return t if tz == "UTC" else t.astimezone(zoneinfo.ZoneInfo(tz))


SIDE_SYMBOLS = {"left": ("circle", "x"), "right": ("diamond", "cross")}  # (held, removed) markers per join side


def key_timeline_figure(d: KeyDiagnosis, watermarks: dict[int, int], tz: str = "UTC") -> go.Figure:
    """The key's life across batches (entered, matched, evicted ...): each marker at the row's own
    event time (a window's start for windowed keys), against the watermark line of every batch.
    A row without an event time sits on the watermark of its batch (the lowest one drawn while
    there is none yet), and its hover says so."""
    fig = go.Figure()
    batches = sorted(b for b, w in watermarks.items() if w)
    fig.add_trace(
        go.Scatter(
            x=batches,
            y=[_dt(watermarks[b], tz) for b in batches],
            mode="lines",
            name="watermark",
            line={"color": "#bbbbbb", "width": 2},
        )
    )
    # where a marker without any time goes: the lowest time drawn
    floor = min(
        [*(watermarks[b] for b in batches), *(int(e["event_time_ms"]) for e in d.timeline if e.get("event_time_ms"))],
        default=None,
    )
    sides = sorted({e["store"] for e in d.timeline if e["store"] in SIDE_SYMBOLS})
    for event, store in sorted({(e["event"], e["store"] if e["store"] in sides else "") for e in d.timeline}):
        pts = [e for e in d.timeline if e["event"] == event and (e["store"] if e["store"] in sides else "") == store]
        color = next((c for k, c in EVENT_COLORS.items() if event.startswith(k)), "#9467bd")
        ys, notes = [], []
        for e in pts:
            t = e.get("event_time_ms") or e["watermark_ms"] or floor
            ys.append(_dt(t, tz) if t else None)
            notes.append(
                "event time"
                if e.get("event_time_ms")
                else ("watermark (the row has no event time)" if e["watermark_ms"] else "no watermark yet")
            )
        removed = event in ("evicted", "removed")
        # a join's two sides drawn apart: each side its own marker, named in the legend
        symbol = SIDE_SYMBOLS[store][removed] if store else ("x" if removed else "circle")
        fig.add_trace(
            go.Scatter(
                x=[e["batch_id"] for e in pts],
                y=ys,
                mode="markers",
                name=f"{event} ({store} side)" if store else event,
                marker={"size": 12, "color": color, "symbol": symbol, "line": {"width": 1, "color": "#333333"}},
                text=[f"{e['store']}: {n}" for e, n in zip(pts, notes, strict=True)],
                hovertemplate="batch %{x}<br>%{y}<br>%{text}: " + event + "<extra></extra>",
            )
        )
    fig.update_layout(
        height=300,
        margin={"t": 30, "b": 10, "l": 10, "r": 10},
        yaxis_title=f"event time / watermark ({tz})",
        title={"text": f"Life of {d.key!r} in state: its event times against the watermark", "font": {"size": 14}},
        legend={"orientation": "h", "y": -0.3},
    )
    batch_axis(fig, [b for t in fig.data for b in (t.x or ())])
    return finish(fig)


# --------------------------------------------------------------------------- health charts
# Each chart has a table behind it (the CSV export): *_table() returns it, *_figure() draws it.


def watermark_table(batches: list[Batch]) -> pa.Table:
    return pa.table(
        {
            "batch_id": [b.batch_id for b in batches],
            "committed": [b.committed for b in batches],
            "watermark_ms": [b.watermark_ms for b in batches],
            "watermark": [_dt(b.watermark_ms) if b.watermark_ms else None for b in batches],
            "timestamp_ms": [b.timestamp_ms for b in batches],
        }
    )


def byte_unit(max_bytes: float) -> tuple[float, str]:
    """The divisor and label that show ``max_bytes`` in human units (B, KB, MB, GB, TB)."""
    for i, unit in enumerate(("B", "KB", "MB", "GB", "TB")):
        if max_bytes < 1024 ** (i + 1) or unit == "TB":
            return float(1024**i), unit
    return 1.0, "B"


def no_data_figure(title: str, message: str) -> go.Figure:
    """A figure that says why there is nothing to draw, instead of empty axes."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, font={"size": 15}, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=title, height=240, xaxis={"visible": False}, yaxis={"visible": False}, margin={"t": 50, "b": 20})
    return finish(fig)


def watermark_figure(batches: list[Batch], tz: str = "UTC") -> go.Figure:
    marked = [b for b in batches if b.watermark_ms]
    if not marked:
        return no_data_figure("Watermark per batch", "No watermark: it is 0 in every batch (the query defines none).")
    fig = go.Figure(
        go.Scatter(
            x=[b.batch_id for b in marked],
            y=[_dt(b.watermark_ms, tz) for b in marked],
            mode="lines+markers",
            name="watermark",
            line={"color": PALETTE[0]},
        )
    )
    fig.update_layout(title="Watermark per batch", yaxis_title=f"watermark ({tz})", height=360, margin={"t": 50, "b": 40})
    batch_axis(fig, [b.batch_id for b in marked])
    return finish(fig)


def skew_table(r: SkewReport) -> pa.Table:
    parts = sorted(r.rows_by_partition)
    return pa.table(
        {
            "operator_id": [r.operator_id] * len(parts),
            "store_name": [r.store_name] * len(parts),
            "batch_id": [r.batch_id] * len(parts),
            "partition_id": parts,
            "rows": [r.rows_by_partition[p] for p in parts],
            "bytes": [r.bytes_by_partition.get(p, 0) for p in parts],
        }
    )


def skew_figure(r: SkewReport) -> go.Figure:
    """Rows (bars) and bytes on disk (line) per partition: every partition labelled, both axes from zero."""
    parts = sorted(r.rows_by_partition)
    sizes = [r.bytes_by_partition.get(p, 0) for p in parts]
    div, unit = byte_unit(max(sizes, default=0))
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Bar(x=[str(p) for p in parts], y=[r.rows_by_partition[p] for p in parts], name="rows", marker_color=BAR_COLOR),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=[str(p) for p in parts],
            y=[b / div for b in sizes],
            name=f"state files on disk ({unit})",
            mode="lines+markers",
            line={"color": LINE_COLOR, "width": 3},
        ),
        secondary_y=True,
    )
    fig.update_layout(
        title=f"State per partition: op {r.operator_id} {r.store_name} at batch {r.batch_id} ({r.headline})",
        height=400,
        margin={"t": 60, "b": 40, "r": 160},
        legend={"orientation": "v", "x": 1.08, "y": 1},
    )
    fig.update_xaxes(title_text="partition", type="category")
    fig.update_yaxes(title_text="rows in state", secondary_y=False)
    count_axis(fig, max(r.rows_by_partition.values(), default=0), secondary_y=False)
    fig.update_yaxes(title_text=f"bytes on disk ({unit})", rangemode="tozero", tickmode="auto", showgrid=False, secondary_y=True)
    return finish(fig)


def repartition_figure(p: RepartitionPreview, store: StorePreview) -> go.Figure:
    """One store's rows per partition now and after the repartition, side by side: every partition
    labelled, counts from zero."""
    fig = go.Figure()
    for rows, when, color in ((store.rows_before, "now", BAR_COLOR), (store.rows, "after", LINE_COLOR)):
        fig.add_trace(
            go.Bar(x=[str(i) for i in range(len(rows))], y=rows, name=f"{when} ({len(rows)} partitions)", marker_color=color)
        )
    fig.update_layout(
        title=f"Rows per partition, op {store.operator_id} {store.store}: now and after repartitioning to {p.partitions} "
        f"(skew {store.skew_before:.2f} -> {store.skew_after:.2f}, fullest over mean)",
        height=380,
        margin={"t": 60, "b": 40},
        barmode="group",
    )
    fig.update_xaxes(title_text="partition", type="category")
    fig.update_yaxes(title_text="rows in state")
    count_axis(fig, max(store.rows + store.rows_before, default=0))
    return finish(fig)


def repartition_table(p: RepartitionPreview, store: StorePreview) -> pa.Table:
    """One store's rows and estimated bytes per new partition."""
    return pa.table(
        {
            "operator_id": [store.operator_id] * p.partitions,
            "store": [store.store] * p.partitions,
            "new_partition_id": list(range(p.partitions)),
            "rows": store.rows,
            "estimated_bytes": store.bytes,
        }
    )


def partition_rows_figure(rows: dict[int, int], title: str) -> go.Figure:
    """Rows per partition (bars): every partition labelled, counts from zero."""
    parts = sorted(rows)
    fig = go.Figure(go.Bar(x=[str(p) for p in parts], y=[rows[p] for p in parts], name="rows", marker_color=BAR_COLOR))
    fig.update_layout(title=title, height=320, margin={"t": 50, "b": 40}, showlegend=False)
    fig.update_xaxes(title_text="partition", type="category")
    fig.update_yaxes(title_text="rows")
    count_axis(fig, max(rows.values(), default=0))
    return finish(fig)


def skew_heatmap_figure(g: StoreGrowth, num_partitions: int = 0) -> go.Figure:
    """Rows per partition across batches: every partition (empty ones too), colours from zero."""
    batches = sorted(g.rows_by_partition)
    seen = {p for b in batches for p in g.rows_by_partition[b]}
    parts = list(range(max(num_partitions, max(seen, default=-1) + 1)))
    z = [[g.rows_by_partition[b].get(p, 0) for b in batches] for p in parts]
    fig = go.Figure(
        go.Heatmap(
            x=[str(b) for b in batches],
            y=[str(p) for p in parts],
            z=z,
            zmin=0,
            colorscale="Blues",
            colorbar={"title": "rows", "tickformat": ",d", **({"dtick": 1} if max(map(max, z), default=0) <= 5 else {})},
        )
    )
    fig.update_layout(
        title=f"Rows per partition across batches: op {g.operator_id} {g.store_name}",
        xaxis_title="batch",
        yaxis_title="partition",
        height=max(300, 60 + 28 * len(parts)),
        margin={"t": 50, "b": 40},
    )
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return finish(fig)


def growth_table(stores: list[StoreGrowth]) -> pa.Table:
    rows = [
        {
            "operator_id": g.operator_id,
            "store_name": g.store_name,
            "batch_id": b,
            "rows": g.rows[b],
            "inserts": g.inserts.get(b),  # null: not known (the first retained batch of a longer query)
            "deletes": g.deletes.get(b),
            "bytes": g.bytes.get(b, 0),
        }
        for g in stores
        for b in sorted(g.rows)
    ]
    return pa.Table.from_pylist(rows) if rows else pa.table({"operator_id": pa.array([], pa.int64())})


def growth_figure(stores: list[StoreGrowth]) -> go.Figure:
    """Rows and bytes per batch, one colour per store in both panels, axes from zero, legend beside the plot."""
    if not any(g.rows for g in stores):
        return no_data_figure("State growth per batch", "No committed batch with state to measure.")
    top = max((g.bytes.get(b, 0) for g in stores for b in g.rows), default=0)
    div, unit = byte_unit(top)
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, subplot_titles=("rows in state", f"bytes of state files on disk ({unit})")
    )
    for i, g in enumerate(stores):
        bs = sorted(g.rows)
        name = f"op{g.operator_id} {g.store_name}"
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=bs,
                y=[g.rows[b] for b in bs],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line={"color": color},
                meta="rows",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=bs,
                y=[g.bytes.get(b, 0) / div for b in bs],
                mode="lines",
                name=name,
                legendgroup=name,
                showlegend=False,
                line={"color": color},
                meta="bytes",
            ),
            row=2,
            col=1,
        )
    fig.update_layout(
        title="State growth per batch",
        height=560,
        margin={"t": 70, "b": 50, "r": 20},
        legend={"orientation": "v", "yanchor": "top", "y": 1, "xanchor": "left", "x": 1.02},  # beside the plot
    )
    fig.update_yaxes(rangemode="tozero")
    count_axis(fig, max((n for g in stores for n in g.rows.values()), default=0), row=1, col=1)
    batch_axis(fig, [b for g in stores for b in g.rows], row=2, col=1)
    return finish(fig)


# --------------------------------------------------------------------------- progress charts (event logs)


def progress_table(log: ProgressLog) -> pa.Table:
    """Per batch: input rows, rates, duration and each phase's milliseconds, rows dropped as late."""
    phases = [p for p in PHASES if any(p in b.durations for b in log.batches)]
    cols: dict[str, list[Any]] = {
        "batch_id": [b.batch_id for b in log.batches],
        "input_rows": [b.input_rows for b in log.batches],
        "input_rows_per_second": [b.input_rows_per_second for b in log.batches],
        "processed_rows_per_second": [b.processed_rows_per_second for b in log.batches],
        "duration_ms": [b.duration_ms for b in log.batches],
    }
    for p in phases:
        cols[f"{p}_ms"] = [b.durations.get(p) for b in log.batches]
    cols["rows_dropped_by_watermark"] = [sum(o.rows_dropped_by_watermark or 0 for o in b.operators) for b in log.batches]
    return pa.table(cols)


def rates_figure(log: ProgressLog) -> go.Figure:
    """Rows each batch read (bars) and the input and processing rates (lines), both from zero."""
    ids = [b.batch_id for b in log.batches]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12)
    fig.add_trace(go.Bar(x=ids, y=[b.input_rows for b in log.batches], name="input rows", marker_color=BAR_COLOR), row=1, col=1)
    for name, attr, color in (
        ("input rows/s", "input_rows_per_second", PALETTE[1]),
        ("processed rows/s", "processed_rows_per_second", PALETTE[2]),
    ):
        fig.add_trace(
            go.Scatter(x=ids, y=[getattr(b, attr) for b in log.batches], name=name, mode="lines+markers", line={"color": color}),
            row=2,
            col=1,
        )
    fig.update_yaxes(title_text="rows per batch", row=1, col=1)
    count_axis(fig, max((b.input_rows for b in log.batches), default=0), row=1, col=1)
    fig.update_yaxes(title_text="rows per second", rangemode="tozero", row=2, col=1)
    batch_axis(fig, ids, row=2, col=1)
    fig.update_layout(
        title="Input per batch (from the query's progress)",
        height=420,
        margin={"t": 80, "b": 40},
        legend={"orientation": "h", "y": 1.12, "x": 0},
    )
    return finish(fig)


def durations_figure(log: ProgressLog) -> go.Figure:
    """Each batch's time by phase, stacked (getBatch, queryPlanning, walCommit, addBatch ...)."""
    phases = [p for p in PHASES if any(b.durations.get(p) for b in log.batches)]
    if not phases:
        return no_data_figure("Batch duration by phase", "The progress records no durations.")
    longest = max((sum(b.durations.get(p, 0) for p in phases) for b in log.batches), default=0)
    div, unit = (1000.0, "s") if longest >= 10_000 else (1.0, "ms")
    ids = [b.batch_id for b in log.batches]
    fig = go.Figure()
    for i, p in enumerate(phases):
        fig.add_trace(
            go.Bar(x=ids, y=[b.durations.get(p, 0) / div for b in log.batches], name=p, marker_color=PALETTE[i % len(PALETTE)])
        )
    fig.update_layout(
        barmode="stack",
        title="Batch duration by phase",
        yaxis_title=unit,
        yaxis_rangemode="tozero",
        height=360,
        margin={"t": 80, "b": 40},
        legend={"orientation": "h", "y": 1.12, "x": 0},
    )
    batch_axis(fig, ids)
    return finish(fig)


def late_rows_figure(log: ProgressLog) -> go.Figure:
    """Rows each stateful operator dropped by the watermark, per batch (one colour per operator)."""
    from statelens.analysis.runs.progress import late_drops

    title = "Late rows dropped by the watermark"
    drops = late_drops(log)
    if not drops:
        lo, hi = log.batches[0].batch_id, log.batches[-1].batch_id
        return no_data_figure(title, f"No operator dropped rows by the watermark in batches {lo}–{hi}.")
    ids = [b.batch_id for b in log.batches]
    fig = go.Figure()
    for i, d in enumerate(drops):
        fig.add_trace(
            go.Bar(
                x=ids,
                y=[d.by_batch.get(b, 0) for b in ids],
                name=f"operator {d.operator_id} ({d.operator_name})",
                marker_color=PALETTE[(i + 3) % len(PALETTE)],
            )
        )
    fig.update_layout(
        title=title,
        yaxis_title="rows dropped",
        height=320,
        barmode="group",
        margin={"t": 80, "b": 40},
        legend={"orientation": "h", "y": 1.15, "x": 0},
    )
    count_axis(fig, max((n for d in drops for n in d.by_batch.values()), default=0))
    batch_axis(fig, ids)
    return finish(fig)


def memory_figure(log: ProgressLog) -> go.Figure:
    """Per operator: memory the state stores used (bars) against rows in state (line), both from zero."""
    ops = sorted({(o.operator_id, o.operator_name) for b in log.batches for o in b.operators})
    title = "State memory against rows (from the query's progress)"
    if not ops:
        return no_data_figure(title, "The progress reports no stateful operators.")
    top = max((o.memory_used_bytes or 0 for b in log.batches for o in b.operators), default=0)
    div, unit = byte_unit(top)
    ids = [b.batch_id for b in log.batches]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for i, (op_id, name) in enumerate(ops):
        per = {b.batch_id: next((o for o in b.operators if o.operator_id == op_id), None) for b in log.batches}
        color = PALETTE[(2 * i) % len(PALETTE)]
        fig.add_trace(
            go.Bar(
                x=ids,
                y=[(p.memory_used_bytes or 0) / div if p else None for p in per.values()],
                name=f"op {op_id} memory",
                marker_color=color,
                opacity=0.6,
            ),
            secondary_y=False,
        )
        fig.add_trace(
            go.Scatter(
                x=ids,
                y=[p.rows_total if p else None for p in per.values()],
                name=f"op {op_id} ({name}) rows",
                mode="lines+markers",
                line={"color": PALETTE[(2 * i + 1) % len(PALETTE)]},
            ),
            secondary_y=True,
        )
    fig.update_yaxes(title_text=f"memory used ({unit})", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="rows in state", showgrid=False, secondary_y=True)
    count_axis(fig, max((o.rows_total or 0 for b in log.batches for o in b.operators), default=0), secondary_y=True)
    fig.update_layout(title=title, height=360, margin={"t": 80, "b": 40}, legend={"orientation": "h", "y": 1.15, "x": 0})
    batch_axis(fig, ids)
    return finish(fig)


def memory_table(log: ProgressLog) -> pa.Table:
    """Per batch and operator: rows in state, memory used, rows updated, removed and dropped as late."""
    recs = [(b.batch_id, o) for b in log.batches for o in b.operators]
    return pa.table(
        {
            "batch_id": [b for b, _ in recs],
            "operator_id": [o.operator_id for _, o in recs],
            "operator_name": [o.operator_name for _, o in recs],
            "rows_total": [o.rows_total for _, o in recs],
            "memory_used_bytes": [o.memory_used_bytes for _, o in recs],
            "rows_updated": [o.rows_updated for _, o in recs],
            "rows_removed": [o.rows_removed for _, o in recs],
            "rows_dropped_by_watermark": [o.rows_dropped_by_watermark for _, o in recs],
            "commit_time_ms": [o.commit_time_ms for _, o in recs],
            "custom_metrics": [json.dumps(o.custom_metrics, sort_keys=True) for _, o in recs],
        }
    )
