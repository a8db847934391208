"""State Lens: the Streamlit entry point. Routing and the shared sidebar only.

streamlit run app.py
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import streamlit as st

from statelens.views import auth
from statelens.views.common import (
    CHECKPOINT_KEY,
    EVENT_LOG_KEY,
    TIMEZONES,
    TZ_KEY,
    asking,
    cancels_seen,
    checkpoint_input_key,
    current_path,
    default_checkpoint,
    engine_settings,
    fingerprint,
    requested_page,
    sample_checkpoints,
    sample_event_log,
    spark_settings,
    warm_up_in_background,
)

started = time.perf_counter()  # the run's time, in its audit line
st.set_page_config(page_title="State Lens", page_icon=":material/frame_inspect:", layout="wide")

# A shared server (STATELENS_POLICY): nobody signed in sees the sign-in page only; a user's paths are
# checked against their roots for the whole run. Without a policy: None, and nothing changes.
who = auth.gate()

# The checkpoint is chosen once, here, and kept across pages in st.session_state.
# A link may carry it: ?checkpoint=/path/to/checkpoint
# The canonical value lives under CHECKPOINT_KEY (not a widget key, so it survives page
# switches); the text input edits a copy.
if CHECKPOINT_KEY not in st.session_state:
    _default = default_checkpoint()
    st.session_state[CHECKPOINT_KEY] = st.query_params.get("checkpoint") or (_default if auth.may(_default) else "")
    # the query's event log (optional): ?event_log=..., else the bundled sample's own
    st.session_state[EVENT_LOG_KEY] = st.query_params.get("event_log") or sample_event_log(st.session_state[CHECKPOINT_KEY])
# The other sidebar widgets keep their values across page switches the same way.
_DEFAULTS: tuple[tuple[str, str | bool], ...] = ((EVENT_LOG_KEY, ""), (TZ_KEY, "UTC"), ("live", False))
for _key, _value in _DEFAULTS:
    st.session_state[_key] = st.session_state.get(_key, _value)


def _pick() -> None:
    name = st.session_state.get("sample_pick")
    if name:
        st.session_state[CHECKPOINT_KEY] = sample_checkpoints()[name]
        st.session_state[EVENT_LOG_KEY] = sample_event_log(sample_checkpoints()[name])


def _typed(input_key: str) -> None:
    old, new = st.session_state[CHECKPOINT_KEY], st.session_state[input_key].strip()
    st.session_state[CHECKPOINT_KEY] = new
    if st.session_state.get(EVENT_LOG_KEY, "") == sample_event_log(old):  # filled in for a sample, not by the user
        st.session_state[EVENT_LOG_KEY] = sample_event_log(new)


# the name above the navigation (st.logo sits at the sidebar's top; a title in the sidebar would land below the pages)
st.logo(str(Path(__file__).parent / "assets" / "logo.svg"), size="large")
with st.sidebar:
    # The input opens on the chosen checkpoint as its own default, under a key that follows it: a
    # page switch or a new session shows the path at once, and a value a page still sends from
    # before a change is never taken for an edit.
    input_key = checkpoint_input_key(st.session_state[CHECKPOINT_KEY])
    st.text_input(
        "Checkpoint path",
        value=st.session_state[CHECKPOINT_KEY],
        key=input_key,
        on_change=_typed,
        args=(input_key,),
        help="The folder the streaming query was started with as checkpointLocation.",
    )
    st.text_input(
        "Event log (optional)",
        key=EVENT_LOG_KEY,
        placeholder="spark.eventLog.dir, an event log, or progress JSON lines",
        help="The query's Spark event log (a file, an eventlog_v2_* folder or the spark.eventLog.dir folder; "
        "plain, lz4, snappy or zstd) or a file of StreamingQueryProgress JSON lines. It adds input rates, "
        "durations and the rows dropped by the watermark; it is matched to the checkpoint by query id.",
    )
    samples = {name: path for name, path in sample_checkpoints().items() if auth.may(path)}
    if samples:
        current = next((n for n, p in samples.items() if p == st.session_state[CHECKPOINT_KEY]), None)
        st.session_state["sample_pick"] = current
        st.pills("Bundled samples", list(samples), key="sample_pick", on_change=_pick, selection_mode="single")
    st.toggle(
        "Live: refresh on new commits",
        key="live",
        help="Checks the checkpoint's offsets/ and commits/ every 10 s and refreshes the page when a batch commits.",
    )
    st.selectbox(
        "Time zone",
        TIMEZONES,
        key=TZ_KEY,
        help="Times in tables and charts are shown in this zone (UTC by default). Explanations always say UTC.",
    )
    auth.sidebar(who)
if who is None:  # server-wide settings: on a shared server they are the operator's, not a user's
    spark_settings()
    engine_settings()
warm_up_in_background()

sections = {
    "Checkpoint": [
        st.Page("views/overview.py", title="Overview", icon=":material/timeline:", default=True),
        st.Page("views/checkpoints.py", title="Checkpoints", icon=":material/folder_open:"),
        st.Page("views/pipeline.py", title="Pipeline", icon=":material/lan:"),
        st.Page("views/operators.py", title="Operators and stores", icon=":material/account_tree:"),
    ],
    "State": [
        st.Page("views/browser.py", title="State browser", icon=":material/table_view:"),
        st.Page("views/sql.py", title="SQL", icon=":material/terminal:"),
    ],
    "Diagnose": [
        st.Page("views/why_missing.py", title="Why is my key missing?", icon=":material/search_insights:"),
        st.Page("views/health.py", title="State health", icon=":material/monitor_heart:"),
    ],
    # it runs the user's script on this server: on a shared server only for groups with run_jobs
    "Change": [
        st.Page("views/preflight.py", title="Will my change restart?", icon=":material/published_with_changes:"),
    ]
    if who is None or who.run_jobs
    else [],
}
nav = st.navigation(sections)
st.session_state["_page"] = nav.url_path or "overview"
try:
    with asking():
        if auth.page_offered(requested_page(), {p.url_path for pages in sections.values() for p in pages}):
            nav.run()
    cancels_seen()
finally:  # a page that stops early (st.stop) is still a question asked
    auth.question(
        page=st.session_state["_page"],
        checkpoint=current_path(),
        event_log=st.session_state.get(EVENT_LOG_KEY) or None,
        params={k: st.query_params.get_all(k) for k in st.query_params if k != "checkpoint"},
        seconds=round(time.perf_counter() - started, 3),
    )

if st.session_state.get("live"):

    @st.fragment(run_every=10)
    def _watch_commits() -> None:
        """Reruns the whole app when the checkpoint commits (a stat of two folders, no read)."""
        auth.bind(who)  # a fragment's run starts here, not at the top: the user's bounds again
        fp = (current_path(), fingerprint(current_path()))
        seen = st.session_state.setdefault("_live_seen", fp)
        if fp != seen:
            st.session_state["_live_seen"] = fp
            st.rerun(scope="app")
        st.caption(f":material/sync: live · checked {dt.datetime.now(dt.UTC):%H:%M:%S} UTC")

    with st.sidebar:
        _watch_commits()
