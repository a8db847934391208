"""Operators and stores: Spark's state-metadata table beside the files and bytes on disk, and
each store's version history (files and bytes per version, retained or purged) and schema files."""

from __future__ import annotations

import streamlit as st

from statelens import server
from statelens.results import StateFiles
from statelens.views.common import (
    cached,
    check_with_spark,
    checkpoint_info,
    controls,
    engine_caption,
    fitted_select,
    grid_height,
    guard,
    opened,
    operator_label,
)

st.header("Operators and stores")
info = checkpoint_info()
if info is not None:
    if not info.operators:
        st.info("This checkpoint has no state/ folder: its query has no stateful operator.")
    else:
        for op in info.operators:
            stores = ", ".join(f"`{s.store_name}`" for s in op.stores)
            families = sorted({s.family_of for s in op.stores if s.family_of})
            if families:  # join state format 3
                stores += f" (column families of store {', '.join(f'`{f}`' for f in families)})"
            extra = f" — state variables: {', '.join(op.state_variables)}" if op.state_variables else ""
            st.markdown(
                f"**Operator {op.operator_id}: {op.operator_name}** ({op.stores[0].num_partitions if op.stores else '?'} partitions) — {stores}{extra}"
            )
            if op.properties:
                with st.expander(f"Operator {op.operator_id}: operatorProperties (state metadata v2)"):
                    st.json(op.properties, expanded=2)
        files = StateFiles(info, [])  # empty tables when they cannot be listed (the error says why)
        with guard():
            files = cached(info.path).state_files()
        st.subheader("Files on disk")
        versions = [b.batch_id + 1 for b in info.committed_batches]
        st.caption(
            "Batch N writes state version N + 1"
            + (f": versions {versions[0]}–{versions[-1]} are batches {versions[0] - 1}–{versions[-1] - 1}." if versions else ".")
        )
        st.dataframe(files.summary(), hide_index=True, width="stretch")

        st.subheader("Checkpoint history")
        row = controls()
        op_id = fitted_select(
            row, "Operator", [o.operator_id for o in info.operators], lambda i: operator_label(info, i), key="ops_op"
        )
        op = info.operator(op_id)
        assert op is not None
        store = fitted_select(row, "Store", [s.store_name for s in op.folders], key="ops_store")  # as on disk
        history = files.history(op_id, str(store))
        purged = (
            sum(1 for v in history.column("on_disk").to_pylist() if v == "purged") if "on_disk" in history.column_names else 0
        )
        st.caption(
            f"Per state version, the files of every partition of `{store}`: deltas and snapshots (HDFS provider), "
            "changelogs and zipped snapshots (RocksDB). "
            + (
                f"{purged} committed batch(es) have no file left: purged (minBatchesToRetain)."
                if purged
                else "Every committed batch's version is on disk."
            )
        )
        st.dataframe(history, hide_index=True, width="stretch", height=grid_height(len(history), 300))
        st.markdown("**State schema files**")
        st.caption(
            "`_metadata/schema` per store; transformWithState keeps `_stateSchema/<column family>/<schema version>_<id>`, "
            "a new file each time its state schema evolves."
        )
        st.dataframe(files.schema_files(op_id), hide_index=True, width="stretch")
        st.subheader("state-metadata")
        with guard():
            meta = opened(info.path).state_metadata()
            st.caption(
                "Spark's `state-metadata` table: a row per store in each operator's metadata, with the batches of "
                "`commits/`" + (" (none before Spark 4.0: no operator metadata)." if not meta.num_rows else ".")
            )
            st.dataframe(meta, hide_index=True, width="stretch", height=grid_height(meta.num_rows))
            engine_caption(server.engine_of(meta), server.fallback_of(meta))
            check_with_spark(
                server.engine_of(meta),
                lambda: opened(info.path).check_state_metadata(meta),
                "state-metadata",
            )
