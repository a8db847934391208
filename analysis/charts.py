"""Plotly figures built from analysis results (pure: data in, figure out)."""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go

from analysis.why_missing import KeyDiagnosis

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
