"""Overview: query id, batches (committed or not, watermark, timestamp), watermark timeline, conf."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from analysis import charts
from analysis.overview import batches_table, conf_table, summary
from views.common import chart_downloads, checkpoint_info, doctor_cached, guard

st.header("Overview")
info = checkpoint_info()
if info is not None:
    s = summary(info)
    st.caption(f"`{info.path}`")
    c = st.columns(5)
    c[0].metric("Query id", (s["query_id"] or "?")[:8], help=s["query_id"])
    c[1].metric("Batches", s["batches"])
    c[2].metric("Last committed", "-" if s["last_committed"] is None else s["last_committed"])
    wm = s["watermark_ms"]
    wm_dt = dt.datetime.fromtimestamp(wm / 1000, dt.UTC) if wm else None
    c[3].metric(
        "Watermark (UTC)",
        wm_dt.strftime("%H:%M:%S") if wm_dt else "none",
        help=f"{wm_dt.isoformat()} ({wm} ms), batch {info.batches[-1].batch_id}" if wm_dt else "No watermark in any batch.",
    )
    c[4].metric("Stateful operators", s["operators"])
    if s["uncommitted"]:
        st.warning(
            f"Batch {', '.join(map(str, s['uncommitted']))} has an offset but no commit yet: it is running or was interrupted."
        )

    batches = batches_table(info)
    left, right = st.columns([3, 2])
    with left:
        st.subheader("Watermark timeline")
        if any(b.watermark_ms for b in info.batches):
            fig = charts.watermark_figure(info.batches)
            fig.update_layout(title=None, height=340, margin={"t": 10, "b": 10})
            st.plotly_chart(fig, width="stretch")
            chart_downloads("watermark", charts.watermark_figure(info.batches), charts.watermark_table(info.batches), "dl-ov-wm")
        else:
            st.info("The watermark is 0 in every batch: the query defines no watermark (or has not advanced it).")
    with right:
        st.subheader("Batches")
        st.dataframe(batches, hide_index=True, width="stretch", height=340)
    st.subheader("Checkpoint doctor")
    with guard():
        doc = doctor_cached(info.path)
        c = st.columns(3)
        c[0].metric("Restart resumes at batch", "-" if doc.restart_batch is None else doc.restart_batch)
        c[1].metric(
            "Batches the state reader can load",
            f"{len(doc.loadable_batches)} / {len(doc.committed)}",
            help="Committed batches whose every store partition has its snapshot and deltas on disk.",
        )
        c[2].metric("Checkpoint format", f"v{doc.checkpoint_format_version}")
        if not doc.problems:
            st.success("No problems found: every committed batch has its commit, offsets and state files.")
        for pr in doc.problems:
            show = {"error": st.error, "warning": st.warning}.get(pr.severity, st.info)
            show(f"**{pr.title}.** {pr.meaning} *What to do:* {pr.action}")
    st.subheader("Configuration captured in offsets/")
    st.caption(f"Provider **{s['provider']}**, shuffle partitions **{s['shuffle_partitions']}**.")
    st.dataframe(conf_table(info), hide_index=True, width="stretch")
