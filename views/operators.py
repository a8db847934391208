"""Operators and stores: Spark's state-metadata table beside the files and bytes on disk."""

from __future__ import annotations

import streamlit as st

from analysis.layout import store_files_summary
from spark_io.checkpoint import list_state_files
from views.common import checkpoint_info, guard, read_state_metadata_cached

st.header("Operators and stores")
info = checkpoint_info()
if info is not None:
    if not info.operators:
        st.info("This checkpoint has no state/ folder: its query has no stateful operator.")
    else:
        for op in info.operators:
            stores = ", ".join(f"`{s.store_name}`" for s in op.stores)
            extra = f" — state variables: {', '.join(op.state_variables)}" if op.state_variables else ""
            st.markdown(
                f"**Operator {op.operator_id}: {op.operator_name}** ({op.stores[0].num_partitions if op.stores else '?'} partitions) — {stores}{extra}"
            )
        st.subheader("Files on disk")
        with guard():
            st.dataframe(store_files_summary(list_state_files(info.path)), hide_index=True, width="stretch")
        st.subheader("state-metadata (Spark)")
        with guard(), st.spinner("Reading state-metadata with Spark (the first read starts Spark)..."):
            st.dataframe(read_state_metadata_cached(info.path), hide_index=True, width="stretch")
