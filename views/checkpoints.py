"""Checkpoints: every query under a folder or bucket prefix at a glance, one row each, sortable;
each row opens its checkpoint in the app. Only listings and small log files are read."""

from __future__ import annotations

import datetime as dt
import urllib.parse

import pandas as pd
import streamlit as st

from statelens.text import human_bytes
from statelens.views import auth
from statelens.views.common import checkpoints_under, guard, samples_folder

st.header("Checkpoints")
st.caption(
    "Every checkpoint (a folder with offsets/ and commits/) under a local folder or a bucket prefix "
    "(s3://, abfss://, gs://): its last batch, how far behind it is, its watermark's lag behind the clock, "
    "its state on disk and the doctor's worst finding. Click a column to sort; open a checkpoint from its row."
)
prefix = st.text_input("Folder or prefix", value=st.query_params.get("prefix", samples_folder()), key="fleet_prefix").strip()
if prefix:
    with guard():
        listing = checkpoints_under(prefix)
        skipped = listing.skipped_line()
        if skipped:
            auth.refused(skipped)  # in this run's audit line (a kept listing is not listed again)
            st.warning(skipped)
        rows = list(listing)
        if not rows:
            st.info(f"No checkpoint under {prefix}.")
        else:
            order = {"error": 0, "warning": 1, "info": 2}
            rows = sorted(rows, key=lambda r: (r.error is None, order.get(r.worst_severity or "", 3), r.path))
            frame = pd.DataFrame(
                {
                    "open": ["./?checkpoint=" + urllib.parse.quote(r.path, safe="") for r in rows],
                    "checkpoint": [r.path for r in rows],
                    "doctor": [r.error or (f"{r.worst_severity}: {r.worst}" if r.worst else "ok") for r in rows],
                    "last batch": [r.last_committed for r in rows],
                    "committed at (UTC)": [
                        dt.datetime.fromtimestamp(r.committed_at_ms / 1000, dt.UTC).replace(tzinfo=None)
                        if r.committed_at_ms
                        else None
                        for r in rows
                    ],
                    "batches behind": [r.uncommitted for r in rows],
                    "watermark lag (h)": [round(r.watermark_lag_ms / 3_600_000, 1) if r.watermark_lag_ms else None for r in rows],
                    "operators": [", ".join(r.operators) for r in rows],
                    "state bytes": [r.state_bytes for r in rows],
                    "state": [human_bytes(r.state_bytes) for r in rows],
                    "findings (file sizes)": ["; ".join(r.findings) for r in rows],
                }
            )
            st.dataframe(
                frame,
                hide_index=True,
                column_config={
                    "open": st.column_config.LinkColumn("open", display_text="open"),
                    "state bytes": st.column_config.NumberColumn("state bytes", format="%d"),
                },
            )
            bad = sum(1 for r in rows if r.error or r.worst_severity == "error")
            st.caption(f"{len(rows)} checkpoint(s); {bad} with an error. State: the bytes of its state files on disk.")
