"""State health: findings, skew (now and across batches), growth, watermarks, exports, report."""

from __future__ import annotations

import streamlit as st

from statelens.analysis.charts import charts
from statelens.analysis.charts.report import checkup_report
from statelens.text import counted_stores_text, key_json, rows_in_state
from statelens.views.common import (
    audited,
    cached,
    chart,
    chart_downloads,
    check_with_spark,
    checkpoint_info,
    controls,
    current_event_log,
    current_tz,
    engine_caption,
    fitted_select,
    grid_height,
    guard,
    metric_row,
    opened,
    operator_label,
    with_progress,
)

st.header("State health")
info = checkpoint_info()
if info is not None and not (info.operators and info.committed_batches):
    st.info("This checkpoint has no committed state: there is nothing to check.")
elif info is not None:
    with guard():
        c = with_progress(
            "Checking skew, growth, watermarks and configuration",
            lambda: cached(info.path, current_event_log()).checkup(current_event_log()),
            "health",
        )
        warnings = [f for f in c.findings if f.severity == "warning"]
        total_rows = rows_in_state(c.growth.stores)
        metric_row(
            [
                ("Warnings", len(warnings), None),
                ("Notes", len(c.findings) - len(warnings), None),
                ("Rows in state", f"{total_rows:,}", counted_stores_text(c.growth.stores)),
                ("Stores", len(c.growth.stores), None),
            ]
        )
        if not warnings:
            st.success("No warnings: the state looks healthy.")
        for f in c.findings:
            text = f"**{f.code}**: {f.message}" + (f"  \nSetting: `{f.setting}`" if f.setting else "")
            (st.warning if f.severity == "warning" else st.info)(text)
        st.download_button(
            "Download the health report (one HTML file)",
            audited(
                lambda: checkup_report(c.info, c.skews, c.growth.stores, c.findings, c.progress, c.doctor).encode(),
                "statelens-health-report.html",
            ),
            "statelens-health-report.html",
            "text/html",
            key="report",
            on_click="ignore",
            type="primary",
        )

        if c.progress is None:
            st.caption("Give the query's event log in the sidebar to check for rows dropped by the watermark.")
        t_skew, t_growth, t_wm, t_mem, t_rep = st.tabs(["Skew", "Growth", "Watermark", "Memory", "Repartition"])
        with t_skew:
            row = controls()
            op_id = fitted_select(
                row, "Operator", [o.operator_id for o in info.operators], lambda i: operator_label(info, i), key="h_op"
            )
            op = info.operator(op_id)
            assert op is not None
            stores = [s.state_var or s.store_name for s in op.sources if not s.join_side and not s.timers]
            store = fitted_select(
                row, "Store", stores, index=stores.index(op.default_store) if op.default_store in stores else 0, key="h_store"
            )
            batch = fitted_select(row, "Batch", [b.batch_id for b in info.committed_batches][::-1], key="h_batch")
            with guard():
                r = cached(info.path).skew(op_id, str(store), batch).report
                engine_caption(r.engine, r.engine_note)
                check_with_spark(r.engine, lambda: opened(info.path).check_skew(r), "skew")
                little = r.headline if r.too_little_state else None
                metric_row(
                    [
                        (
                            "Skew max/min",
                            r.ratio_text,
                            little or "The seed's measure: rows in the fullest partition over the emptiest.",
                        ),
                        ("max/median", "-" if little else f"{r.max_over_median:.1f}x", little),
                        ("Rows", f"{sum(r.rows_by_partition.values()):,}", None),
                    ]
                )
                for f in r.findings:  # the notes are above, with the others; here the store's warnings
                    if f.severity == "warning":
                        st.warning(f"**{f.code}**: {f.message}")
                fig = charts.skew_figure(r)
                chart(fig, key="skew-chart")
                chart_downloads(f"skew-op{op_id}-{store}-b{batch}", fig, charts.skew_table(r), "dl-skew")
                if any(t["rows"] > 1 for t in r.top_keys):
                    st.markdown("**Hottest keys** (rows per key, the key as JSON)")
                    st.dataframe(
                        [{"key": key_json(t["key"]), "rows": t["rows"]} for t in r.top_keys], hide_index=True, width="stretch"
                    )
                else:
                    st.caption("Every key holds one row: no key is hotter than another.")
                g = next((g for g in c.growth.stores if g.operator_id == op_id and g.store_name == store), None)
                if g is not None:
                    heat = charts.skew_heatmap_figure(g, len(r.rows_by_partition))
                    chart(heat, key="heat-chart")
                    chart_downloads(f"skew-over-time-op{op_id}-{store}", heat, None, "dl-heat")
                    source = (
                        "from the change feed"
                        if g.method == "change feed"
                        else "from the state at each batch: this store keeps no change feed"
                    )
                    st.caption(f"Rows per partition across batches ({source}): is the skew new or old?")
        with t_growth:
            fig = charts.growth_figure(c.growth.stores)
            chart(fig, key="growth-chart")
            table = charts.growth_table(c.growth.stores)
            chart_downloads("growth", fig, table, "dl-growth")
            st.dataframe(table, hide_index=True, width="stretch", height=grid_height(table.num_rows, 300))
            counted = {g.described() for g in c.growth.stores}
            st.caption(
                "Rows: the keys in each store after the batch. "
                + " ".join(f"{how[0].upper()}{how[1:]}." for how in sorted(counted))
                + " An empty count: not known (the query's older batches are gone, and with them what the first one left changed)."
            )
        with t_wm:
            fig = charts.watermark_figure(info.batches, current_tz())
            chart(fig, key="wm-chart")
            chart_downloads("watermark", fig, charts.watermark_table(info.batches), "dl-wm")
        with t_mem:
            if c.progress is None:
                st.info("Memory per operator is in the query's progress: give its event log in the sidebar.")
            else:
                fig = charts.memory_figure(c.progress)
                chart(fig, key="mem-chart")
                table = charts.memory_table(c.progress)
                chart_downloads("memory", fig, table, "dl-mem")
                st.caption("Per batch and operator, from the query's progress (custom metrics as JSON):")
                st.dataframe(table, hide_index=True, width="stretch", height=grid_height(table.num_rows, 300))
        with t_rep:
            now = info.current_partitions or 1
            n = st.number_input(
                "New partition count",
                min_value=1,
                max_value=100_000,
                value=now * 2,
                step=1,
                key="rep_n",
                help="What Spark's offline repartition (4.2+) would give: each stored key's new partition, as Spark's "
                "hash partitioning computes it. Nothing is written.",
            )
            with guard():
                p = with_progress("Placing every stored key", lambda: cached(info.path).repartition(int(n)).report, "repartition")
                if p.spark_error_class:
                    st.error(f"Spark would refuse: `{p.spark_error_class}`. {p.spark_refusal}")
                for w in p.warnings:
                    st.warning(w)
                for u in p.unknown:
                    st.info(u)
                metric_row(
                    [
                        ("Partitions", f"{p.current} → {p.partitions}", None),
                        ("Skew now", f"{p.skew_before:.2f}", "The fullest partition over the mean, the worst store."),
                        ("Skew after", f"{p.skew_after:.2f}", "The same, after the repartition."),
                    ]
                )
                for store in p.stores:
                    fig = charts.repartition_figure(p, store)
                    chart(fig, key=f"rep-{store.operator_id}-{store.store}")
                    name = f"repartition-{p.partitions}-op{store.operator_id}-{store.store}"
                    chart_downloads(name, fig, charts.repartition_table(p, store), f"dl-{name}")
                    if store.hot_keys:
                        st.markdown("**Hottest keys** and their partitions (a key's rows stay together whatever the count)")
                        st.dataframe(
                            [
                                {"key": key_json(k["key"]), "rows": k["rows"], "now": k["from"], "after": k["to"]}
                                for k in store.hot_keys
                            ],
                            hide_index=True,
                            width="stretch",
                        )
                st.markdown("**The command** (with the query stopped):")
                st.code(p.command, language="python")
                st.caption("Bytes per new partition are estimated: each row at its current partition's bytes on disk per row.")
