"""Plotly figures built from analysis results (pure: data in, figure out)."""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
import pyarrow as pa
from plotly.subplots import make_subplots

from analysis.health import SkewReport, StoreGrowth
from analysis.why_missing import KeyDiagnosis
from spark_io.checkpoint import Batch

EVENT_COLORS = {
    "entered state": "#1f77b4",
    "updated": "#7f7f7f",
    "matched": "#2ca02c",
    "evicted": "#d62728",
    "removed": "#d62728",
}


def _dt(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def key_timeline_figure(d: KeyDiagnosis, watermarks: dict[int, int]) -> go.Figure:
    """The key's life across batches (entered, matched, evicted ...) drawn on the watermark line."""
    fig = go.Figure()
    batches = sorted(b for b, w in watermarks.items() if w)
    fig.add_trace(
        go.Scatter(
            x=batches,
            y=[_dt(watermarks[b]) for b in batches],
            mode="lines",
            name="watermark",
            line={"color": "#bbbbbb", "width": 2},
        )
    )
    for event in sorted({e["event"] for e in d.timeline}):
        pts = [e for e in d.timeline if e["event"] == event]
        color = next((c for k, c in EVENT_COLORS.items() if event.startswith(k)), "#9467bd")
        fig.add_trace(
            go.Scatter(
                x=[e["batch_id"] for e in pts],
                y=[_dt(e["watermark_ms"]) if e["watermark_ms"] else None for e in pts],
                mode="markers",
                name=event,
                marker={"size": 12, "color": color, "symbol": "x" if event in ("evicted", "removed") else "circle"},
                text=[e["store"] for e in pts],
                hovertemplate="batch %{x}<br>%{text}: " + event + "<extra></extra>",
            )
        )
    fig.update_layout(
        height=300,
        margin={"t": 30, "b": 10, "l": 10, "r": 10},
        xaxis_title="batch",
        yaxis_title="watermark (UTC)",
        title={"text": f"Life of {d.key!r} in state", "font": {"size": 14}},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


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


def watermark_figure(batches: list[Batch]) -> go.Figure:
    marked = [b for b in batches if b.watermark_ms]
    fig = go.Figure(
        go.Scatter(
            x=[b.batch_id for b in marked], y=[_dt(b.watermark_ms) for b in marked], mode="lines+markers", name="watermark"
        )
    )
    title = "Watermark per batch" if marked else "Watermark per batch: none (0 in every batch)"
    fig.update_layout(title=title, xaxis_title="batch", yaxis_title="watermark (UTC)", height=360, margin={"t": 50, "b": 40})
    return fig


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
    parts = sorted(r.rows_by_partition)
    ratio = "∞ (an empty partition)" if r.skew_ratio is None else f"{r.skew_ratio:.1f}x"
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=parts, y=[r.rows_by_partition[p] for p in parts], name="rows"), secondary_y=False)
    fig.add_trace(
        go.Scatter(x=parts, y=[r.bytes_by_partition.get(p, 0) for p in parts], name="bytes on disk", mode="lines+markers"),
        secondary_y=True,
    )
    fig.update_layout(
        title=f"State per partition: op {r.operator_id} {r.store_name} at batch {r.batch_id} (max/min {ratio}, max/median {r.max_over_median:.1f}x)",
        xaxis_title="partition",
        height=380,
        margin={"t": 60, "b": 40},
        legend={"orientation": "h", "y": -0.2},
    )
    fig.update_yaxes(title_text="rows", secondary_y=False)
    fig.update_yaxes(title_text="bytes", secondary_y=True)
    return fig


def skew_heatmap_figure(g: StoreGrowth) -> go.Figure:
    batches = sorted(g.rows_by_partition)
    parts = sorted({p for b in batches for p in g.rows_by_partition[b]})
    z = [[g.rows_by_partition[b].get(p, 0) for b in batches] for p in parts]
    fig = go.Figure(go.Heatmap(x=batches, y=parts, z=z, colorscale="Blues", colorbar={"title": "rows"}))
    fig.update_layout(
        title=f"Rows per partition across batches: op {g.operator_id} {g.store_name}",
        xaxis_title="batch",
        yaxis_title="partition",
        height=360,
        margin={"t": 50, "b": 40},
    )
    return fig


def growth_table(stores: list[StoreGrowth]) -> pa.Table:
    rows = [
        {
            "operator_id": g.operator_id,
            "store_name": g.store_name,
            "batch_id": b,
            "rows": g.rows[b],
            "inserts": g.inserts.get(b, 0),
            "deletes": g.deletes.get(b, 0),
            "bytes": g.bytes.get(b, 0),
        }
        for g in stores
        for b in sorted(g.rows)
    ]
    return pa.Table.from_pylist(rows) if rows else pa.table({"operator_id": pa.array([], pa.int64())})


def growth_figure(stores: list[StoreGrowth]) -> go.Figure:
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("rows in state", "bytes of state files on disk"))
    for g in stores:
        bs = sorted(g.rows)
        name = f"op{g.operator_id} {g.store_name}"
        fig.add_trace(
            go.Scatter(x=bs, y=[g.rows[b] for b in bs], mode="lines+markers", name=name, legendgroup=name), row=1, col=1
        )
        fig.add_trace(
            go.Scatter(
                x=bs,
                y=[g.bytes.get(b, 0) for b in bs],
                mode="lines",
                name=name,
                legendgroup=name,
                showlegend=False,
                line={"dash": "dot"},
            ),
            row=2,
            col=1,
        )
    fig.update_layout(
        title="State growth per batch", height=520, margin={"t": 70, "b": 40}, legend={"orientation": "h", "y": -0.12}
    )
    fig.update_xaxes(title_text="batch", row=2, col=1)
    return fig
