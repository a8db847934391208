"""Pipeline: the queries under a root chained through their tables (a Declarative Pipeline's storage
root too), drawn; each query's health at a glance, how far each hop lags, and links to each query's
pages. Only logs and listings are read (no JVM). Linkable: ?root=...&data_root=..."""

from __future__ import annotations

import urllib.parse

import pandas as pd
import streamlit as st

from statelens.analysis.charts.pipeline import batch_ranges, health, health_text, pipeline_dot
from statelens.text import fmt_time, human_bytes
from statelens.views.common import (
    CHECKPOINT_KEY,
    EVENT_LOG_KEY,
    current_event_log,
    current_path,
    guard,
    metric_row,
    pipeline_cached,
    pipeline_root,
    sample_data_root,
    sample_event_log,
    sample_pipeline,
)


def _link(page: str, **params: str) -> str:
    return f"./{page}?" + urllib.parse.urlencode({k: v for k, v in params.items() if v})


def follow(root: str, data_root: str) -> None:
    """The button's callback (before the sidebar's widgets are drawn): the why-missing page is given this root."""
    if st.session_state.get(EVENT_LOG_KEY, "") == sample_event_log(st.session_state.get(CHECKPOINT_KEY, "")):
        st.session_state[EVENT_LOG_KEY] = ""  # a bundled sample's, filled in for it: not this pipeline's
    st.session_state[CHECKPOINT_KEY] = root
    st.session_state["wm_data_root"] = data_root
    st.session_state["pl_follow"] = True


if st.session_state.pop("pl_follow", False):  # the button was clicked: its callback gave the page the root
    st.switch_page("views/why_missing.py")
st.header("Pipeline")
st.caption(
    "The streaming queries under a folder or bucket prefix (a Declarative Pipeline's storage root too) and the "
    "tables between them: a query's table read by a later query is a hop, linked file by file from the writer's "
    "sink log (_spark_metadata) to the reader's source log. Queries sharing no hop are separate pipelines."
)
with guard():
    default_root = st.query_params.get("root") or pipeline_root() or sample_pipeline()
    c1, c2 = st.columns(2)
    root = c1.text_input(
        "Root", value=default_root, key="pl_root", help="A folder or URI prefix holding the checkpoints, at any depth."
    )
    root = root.strip()
    data_root = c2.text_input(
        "Tables' folder (optional)",
        value=st.query_params.get("data_root") or sample_data_root(root),
        key=f"pl_data_root_{root}",
        help="Where the tables are now, when not where the logs say: a Declarative Pipeline's warehouse, a copy.",
    ).strip()
    if not root:
        st.info("Type a folder holding checkpoints above.")
        st.stop()
    st.query_params.update({"root": root} | ({"data_root": data_root} if data_root else {}))
    if not data_root:
        st.query_params.pop("data_root", None)
    # the sidebar's event log, unless it is a bundled sample's, filled in for the checkpoint there
    event_log = current_event_log()
    event_log = None if event_log == sample_event_log(current_path()) else event_log
    pipeline = pipeline_cached(root, data_root or None, event_log)
    groups = pipeline.groups()
    lagging = [h for h in pipeline.hops if h.unread and health(pipeline.query(h.downstream)) != "superseded"]
    metric_row([
        ("Queries", len(pipeline.queries), "Checkpoints under the root; a Declarative Pipeline's superseded flow versions too."),
        ("Hops", len(pipeline.hops), "Tables one query writes and a later query reads."),
        ("Pipelines", len(groups), "Groups of queries linked by hops."),
        ("Hops lagging", len(lagging), "Hops whose reader has not read the writer's newest batches yet."),
        ("With a problem", sum(1 for q in pipeline.queries if q.problem), "The doctor's worst problem, or an unreadable checkpoint."),
    ])  # fmt: skip
    for i, group in enumerate(groups, 1):
        st.subheader(f"Pipeline {i}: " + " → ".join(group) if len(groups) > 1 else " → ".join(group))
        st.graphviz_chart(pipeline_dot(pipeline, group))
        st.caption(
            "Boxes: queries (green ok, red a problem, grey dashed superseded by a full refresh), with their last batch, "
            "watermark and state on disk; cylinders: tables; folders: input folders no query here writes. An edge from "
            "a table to a query says how many of the writer's batches it has not read yet."
        )
        rows = [pipeline.query(n) for n in group]
        frame = pd.DataFrame({
            "query": [q.name for q in rows],
            "health": [health_text(q) for q in rows],
            "last batch": [q.last_batch for q in rows],
            "watermark (UTC)": [fmt_time(q.watermark_ms)[:19] if q.watermark_ms else None for q in rows],
            "state": [human_bytes(q.state_bytes) for q in rows],
            "writes": [q.sink or "" for q in rows],
            "overview": [_link("overview", checkpoint=q.checkpoint) for q in rows],
            "health page": [_link("health", checkpoint=q.checkpoint) for q in rows],
            "SQL": [_link("sql", checkpoint=q.checkpoint) for q in rows],
        })  # fmt: skip
        st.dataframe(
            frame,
            hide_index=True,
            width="stretch",
            column_config={
                "last batch": st.column_config.NumberColumn("last batch", format="%d"),
                "overview": st.column_config.LinkColumn("overview", display_text="open"),
                "health page": st.column_config.LinkColumn("health page", display_text="health"),
                "SQL": st.column_config.LinkColumn("SQL", display_text="SQL"),
            },
        )
        hops = [h for h in pipeline.hops if h.downstream in group]
        if hops:
            st.dataframe(
                pd.DataFrame({
                    "from": [h.upstream for h in hops],
                    "to": [h.downstream for h in hops],
                    "table": [h.table for h in hops],
                    "its batches": [batch_ranges(list(h.read)) for h in hops],
                    "read the writer's batches": [batch_ranges(sorted({n for ns in h.read.values() for n in ns})) for h in hops],
                    "written, not read yet": [
                        "(superseded: no longer runs)" if health(pipeline.query(h.downstream)) == "superseded" else (batch_ranges(h.unread) or "none")
                        for h in hops
                    ],
                }),
                hide_index=True,
                width="stretch",
            )  # fmt: skip
            st.caption(
                "Each hop: which of the reader's batches read the files which of the writer's batches wrote (the batch numbers do not line up)."
            )
        st.button(
            "Follow a key through this pipeline",
            icon=":material/search_insights:",
            key=f"pl_follow_{i}",
            on_click=follow,
            args=(root, data_root),
        )
    for note in pipeline.notes:
        st.warning(f"Not linked: {note}")
