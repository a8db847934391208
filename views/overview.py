"""Overview: query id, batches (committed or not, watermark, timestamp), watermark timeline, conf."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo

import streamlit as st

from statelens.analysis.charts import charts
from statelens.text import human_bytes
from statelens.views.common import (
    cached,
    chart,
    chart_downloads,
    checkpoint_info,
    current_event_log,
    current_tz,
    doctor_cached,
    grid_height,
    guard,
    metric_row,
    opened,
    progress_cached,
)

st.header("Overview")
info = checkpoint_info()
if info is not None:
    overview = cached(info.path).overview()
    s = overview.summary()
    st.caption(f"`{info.path}`")
    wm = s["watermark_ms"]
    tz = current_tz()
    wm_dt = dt.datetime.fromtimestamp(wm / 1000, dt.UTC).astimezone(zoneinfo.ZoneInfo(tz)) if wm else None
    metric_row(
        [
            ("Query id", (s["query_id"] or "?")[:8], s["query_id"]),
            ("Batches", s["batches"], None),
            ("Last committed", "-" if s["last_committed"] is None else s["last_committed"], None),
            (
                f"Watermark ({tz})",
                wm_dt.strftime("%H:%M:%S") if wm_dt else "none",
                f"{wm_dt.isoformat()} ({wm} ms), batch {info.batches[-1].batch_id}" if wm_dt else "No watermark in any batch.",
            ),
            ("Stateful operators", s["operators"], None),
        ]
    )
    if info.operators:
        st.subheader("Operators at a glance")
        with guard():
            # a table that wraps its cells: a join's four stores and its provider stay on screen at any width
            st.table(overview.operators_table(*cached(info.path).key_schemas()), hide_index=True)
    if s["uncommitted"]:
        st.warning(
            f"Batch {', '.join(map(str, s['uncommitted']))} has an offset but no commit yet: it is running or was interrupted."
        )
    for line in overview.repartition_lines():
        st.info(line + " Reads of earlier batches use their own partition count; change feeds skip that batch.")

    st.subheader("Watermark timeline")
    if any(b.watermark_ms for b in info.batches):
        fig = charts.watermark_figure(info.batches, tz)
        fig.update_layout(title=None, height=340, margin={"t": 10, "b": 10})
        chart(fig, key="ov-watermark")
        chart_downloads("watermark", charts.watermark_figure(info.batches, tz), charts.watermark_table(info.batches), "dl-ov-wm")
    else:
        st.info("The watermark is 0 in every batch: the query defines no watermark (or has not advanced it).")
    st.subheader("Batches")  # full width: every column, the timestamp included, stays on screen
    table = overview.batches_table(tz).to_pandas()
    newest = info.last_committed
    if newest is not None:
        st.caption(f"The newest committed batch, {newest}, is highlighted.")
    st.dataframe(
        table.style.apply(lambda row: ["background-color: #fff3cd" if row["batch_id"] == newest else "" for _ in row], axis=1),
        hide_index=True,
        width="stretch",
        height=grid_height(len(table), 340),
    )
    st.subheader("What each batch read and did")
    progress = None
    with guard():
        event_log = current_event_log()
        progress = progress_cached(info.path, event_log) if event_log else None
        log = progress.log if progress is not None else None
        if progress is None or log is None:
            st.info(
                "Rows, rates, durations and the rows dropped by the watermark are in the query's progress: give its "
                "Spark event log (or progress JSON lines) in the sidebar. The sources below come from the checkpoint."
            )
        else:
            drops = progress.late_drops()
            durations = sorted(b.duration_ms for b in log.batches if b.duration_ms is not None)
            metric_row(
                [
                    ("Batches with progress", f"{len(log.batches)} / {len(info.batches)}", f"{log.format}: {log.location}"),
                    ("Rows read", f"{sum(b.input_rows for b in log.batches):,}", "numInputRows summed over those batches"),
                    (
                        "Median batch duration",
                        f"{durations[len(durations) // 2] / 1000:.2f} s" if durations else "-",
                        "batchDuration (triggerExecution where absent)",
                    ),
                    (
                        "Late rows dropped",
                        f"{sum(d.total for d in drops):,}",
                        "numRowsDroppedByWatermark summed over every stateful operator and batch",
                    ),
                    *(
                        [
                            (
                                "Duplicates dropped",
                                f"{sum(d.total for d in duplicates):,}",
                                "numDroppedDuplicateRows summed over every deduplication and batch",
                            )
                        ]
                        if (duplicates := progress.duplicate_drops())
                        else []
                    ),
                ]
            )
            mismatch = progress.mismatch
            for note in log.notes + (
                [f"The progress's operators do not match the checkpoint's: {mismatch}."] if mismatch else []
            ):
                st.warning(note)
            t_late, t_rates, t_dur = st.tabs(["Late rows", "Input and rates", "Durations"])
            table = charts.progress_table(log)
            for tab, name, fig in (
                (t_late, "late-rows", charts.late_rows_figure(log)),
                (t_rates, "input-rates", charts.rates_figure(log)),
                (t_dur, "durations", charts.durations_figure(log)),
            ):
                with tab:
                    chart(fig, key=f"ov-{name}")
                    chart_downloads(name, fig, table, f"dl-ov-{name}")
            lags = progress.lags
            if lags:
                st.caption(
                    f"Snapshot lag at batch {lags[0].batch_id}, as Spark reported it (SnapshotLastUploaded: the store "
                    "instances it reports, most behind first). A restart loads the last snapshot and replays the versions behind it."
                )
                st.dataframe([x.to_dict() for x in lags], hide_index=True, width="stretch", height=grid_height(len(lags), 240))
    with guard():
        rows = (progress or progress_cached(info.path, None)).rows
        read = [
            {
                "batch": r["batch_id"],
                "source": s["label"],
                "read": s.get("summary", ""),
                "start offset": json.dumps(s.get("start_offset")),
                "end offset": json.dumps(s.get("end_offset")),
            }
            for r in rows
            for s in r["sources"]
        ]
        st.dataframe(read, hide_index=True, width="stretch", height=grid_height(len(read), 300))
    st.subheader("Checkpoint doctor")
    with guard():
        doc = doctor_cached(info.path, current_event_log())
        metric_row(
            [
                ("Restart resumes at batch", "-" if doc.restart_batch is None else doc.restart_batch, None),
                (
                    "Batches the state reader can load",
                    f"{len(doc.loadable_batches)} / {len(doc.committed)}" if doc.loadable_known else "unknown",
                    "Committed batches whose every store partition has its snapshot and deltas on disk.",
                ),
                ("Checkpoint format", f"v{doc.checkpoint_format_version}", None),
                (
                    "Files verified by checksum",
                    doc.checksums_verified,
                    "Files whose .crc sidecar (Spark's CRC32C, Hadoop's CRC32) matched their bytes.",
                ),
            ]
        )
        if not doc.problems:
            st.success("No problems found: every committed batch has its commit, offsets and state files.")
        for pr in doc.problems:
            show = {"error": st.error, "warning": st.warning}.get(pr.severity, st.info)
            show(f"**{pr.title}.** {pr.meaning} *What to do:* {pr.action}")
        with st.expander("Why did a restart fail? Paste its error"):
            pasted = st.text_area(
                "The failed run's error (query.exception(), the driver log or an event log's lines)",
                key="restart_error_text",
                height=120,
            )
            if pasted.strip():
                e = opened(info.path).explain_error(pasted)
                st.markdown(f"**{e.title}**" + (f" `{e.error_class}`" if e.error_class else ""))
                for line in e.changes:
                    st.markdown(f"- {line}")
                for line in e.ways_out:
                    st.markdown(f"*Way out:* {line}")
        with st.expander("Restart: what it reads per partition, and what it may change"):
            if doc.restart_cost:
                st.caption(
                    "Each store partition loads its newest snapshot, then replays the changes after it: the partitions that replay the most first."
                )
                cost = [
                    {
                        "operator": c.operator_id,
                        "store": c.store,
                        "partition": c.partition,
                        "snapshot version": c.snapshot_version,
                        "files replayed": c.replayed,
                        "bytes read": human_bytes(c.bytes),
                    }
                    for c in doc.restart_cost
                ]
                st.dataframe(cost, hide_index=True, width="stretch", height=grid_height(len(cost), 300))
            settings = [
                {"setting": x.setting, "value": x.value, "may change": x.may_change, "why": x.why} for x in doc.restart_settings
            ]
            st.dataframe(settings, hide_index=True, width="stretch", height=grid_height(len(settings), 400))
    st.subheader("Configuration captured in offsets/")
    st.caption(f"Provider **{s['provider']}**, shuffle partitions **{s['shuffle_partitions']}**.")
    st.dataframe(overview.conf_table(), hide_index=True, width="stretch")
