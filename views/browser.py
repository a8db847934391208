"""State browser: pick an operator, a store / join side / state variable and a batch; see the rows."""

from __future__ import annotations

import functools
from functools import partial

import pyarrow as pa
import streamlit as st

import statelens
from statelens import server
from statelens.analysis.charts import charts
from statelens.analysis.charts.export import arrow_schema_rows, display_table
from statelens.text import columns_equal_to_key
from statelens.views.common import (
    chart,
    chart_downloads,
    check_with_spark,
    checkpoint_info,
    controls,
    current_tz,
    engine_caption,
    fitted_select,
    grid_height,
    guard,
    opened,
    operator_label,
    source_label,
    with_progress,
)

st.header("State browser")
info = checkpoint_info()
if info is not None:
    committed = [b.batch_id for b in info.committed_batches]
    if not info.operators:
        st.info("This checkpoint has no state/ folder: its query has no stateful operator.")
    elif not committed:
        st.info("No batch is committed yet: there is no state to browse.")
    else:
        row = controls()
        op_id = fitted_select(row, "Operator", [o.operator_id for o in info.operators], lambda i: operator_label(info, i))
        op = info.operator(op_id)
        assert op is not None
        sources = op.sources
        # a join opens on its left side's rows as joinSide shows them, not on a store of counts
        first = next((i for i, s in enumerate(sources) if s.join_side == "left"), 0)
        # keyed by the operator: two operators whose stores read alike ("default") are not one widget
        # keeping the other operator's choice
        source = fitted_select(
            row, "Store, join side or state variable", sources, source_label, index=first, key=f"browser_source_{op_id}"
        )
        batch = fitted_select(row, "Batch", committed[::-1], help="Committed batches, newest first.")
        modes = (
            ["State at batch", "Change feed up to batch"] if source is not None and source.has_change_feed else ["State at batch"]
        )
        mode = row.radio("Read", modes, help="Change feeds are read per store; join sides and timers have none.", width="content")
        table = None
        same: dict[str, str] = {}  # key field -> the value column equal to it
        if source is not None:
            with guard():
                if mode == "State at batch":
                    table, _ = with_progress("Reading the state", lambda: opened(info.path).read_state(source, batch), "browser")
                    st.caption(
                        f"**{table.num_rows:,} rows** · {source.describe()} at batch {batch} · SQL table `{source.table_name}`"
                    )
                    check = partial(opened(info.path).check_state, source, batch, table)
                    what = f"{source.describe()} at batch {batch}"
                else:
                    table, start, end = with_progress(
                        "Reading the change feed", lambda: opened(info.path).read_changes(source, batch), "browser"
                    )
                    st.caption(
                        f"**{table.num_rows:,} changes** · batches {start}–{end} · SQL table `{source.table_name}_changes`"
                    )
                    check = partial(opened(info.path).check_changes, source, start, end, table)
                    what = f"changes of {source.describe()} in batches {start}–{end}"
                same = columns_equal_to_key(table) if mode == "State at batch" else {}
                if same:  # a join side: field0 is the user's order_id
                    st.caption(
                        " · ".join(f"Key `{f}` is `{c}`: the value's `{c}` equals it on every row." for f, c in same.items())
                    )
                engine_caption(server.engine_of(table), server.fallback_of(table))
                check_with_spark(server.engine_of(table), check, f"browser-{mode}")
                tab_rows, tab_schema, tab_parts = st.tabs(["Rows", "Schema", "Rows per partition"])
                with tab_rows:
                    tz = current_tz()
                    shown = display_table(table, tz)
                    st.caption(
                        f"Each field of the key and the value is a column; times in {tz}"
                        + (
                            "; epoch-millisecond fields have a readable time column beside them."
                            if any(c.endswith(" (time)") for c in shown.column_names)
                            else "."
                        )
                    )
                    st.dataframe(shown, hide_index=True, width="stretch", height=grid_height(shown.num_rows))
                with tab_schema:
                    st.dataframe(arrow_schema_rows(table), hide_index=True, width="stretch")
                with tab_parts:
                    if "partition_id" in table.column_names and table.num_rows:
                        counts = table.group_by("partition_id").aggregate([("partition_id", "count")])
                        per_part = dict(
                            zip(counts["partition_id"].to_pylist(), counts["partition_id_count"].to_pylist(), strict=True)
                        )
                        parts_fig = charts.partition_rows_figure(per_part, f"Rows per partition: {what}")
                        chart(parts_fig, key="browser-parts")
                        chart_downloads("rows-per-partition", parts_fig, None, "dl-browser-parts")
                    else:
                        st.info("No rows.")
            # the fields a key can be typed for: a window (a struct) cannot, the group's other fields can
            key_names = (
                [f.name for f in table.schema.field("key").type if not pa.types.is_struct(f.type)]
                if table is not None and "key" in table.column_names
                else []
            )
            if key_names and len(committed) > 1:
                st.subheader("A key across two batches")
                k1, k2, k3, k4 = st.columns([3, 2, 1, 1])
                one_key = k1.text_input("Key", key="kx_key", placeholder="a value of the key field, e.g. ord-42")
                field = k2.selectbox(
                    "Key field", key_names, key="kx_field", format_func=lambda f: f"{f} ({same[f]})" if f in same else f
                )
                newest_first = committed[::-1]
                batch_a = k3.selectbox("Batch A", newest_first, index=min(len(newest_first) - 1, 5), key="kx_a")
                batch_b = k4.selectbox("Batch B", newest_first, index=0, key="kx_b")
                if one_key.strip():
                    lo, hi = sorted((batch_a, batch_b))
                    only = statelens.RowFilter(key_field=field, keys=(one_key.strip(),))
                    with guard():
                        for b in sorted({lo, hi}):
                            rows, _ = with_progress(
                                f"Reading the key at batch {b}",
                                functools.partial(opened(info.path).read_state, source, b, only),
                                f"key-at-{b}",
                            )
                            st.caption(f"**At batch {b}: {rows.num_rows} row(s)**")
                            st.dataframe(
                                display_table(rows, current_tz()),
                                hide_index=True,
                                width="stretch",
                                height=grid_height(rows.num_rows),
                            )
                        if source.has_change_feed and hi > lo:
                            changes, start, end = with_progress(
                                "Reading the key's changes",
                                lambda: opened(info.path).read_changes(source, hi, only, start=lo + 1),
                                "key-changes",
                            )
                            st.caption(
                                f"**Changes in batches {start}–{end}: {changes.num_rows}** (the change feed, filtered "
                                + ("by the native reader" if server.engine_of(changes) == server.NATIVE else "in Spark")
                                + ")"
                            )
                            st.dataframe(
                                display_table(changes, current_tz()),
                                hide_index=True,
                                width="stretch",
                                height=grid_height(changes.num_rows),
                            )
                        elif hi > lo:
                            st.caption("This view has no change feed (join sides, timers): compare the two batches above.")
