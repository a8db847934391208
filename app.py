"""State Lens: the Streamlit entry point. Routing and the shared sidebar only.

    streamlit run app.py
"""

from __future__ import annotations

import streamlit as st

from pages.common import CHECKPOINT_KEY, INPUT_KEY, default_checkpoint, sample_checkpoints

st.set_page_config(page_title="State Lens", page_icon="🔎", layout="wide")

# The checkpoint is chosen once, here, and kept across pages in st.session_state.
# A link may carry it: ?checkpoint=/path/to/checkpoint
# The canonical value lives under CHECKPOINT_KEY (not a widget key, so it survives page
# switches); the text input edits a copy.
if CHECKPOINT_KEY not in st.session_state:
    st.session_state[CHECKPOINT_KEY] = st.query_params.get("checkpoint") or default_checkpoint()
    st.session_state[INPUT_KEY] = st.session_state[CHECKPOINT_KEY]


def _pick(path: str) -> None:
    st.session_state[CHECKPOINT_KEY] = st.session_state[INPUT_KEY] = path


def _typed() -> None:
    st.session_state[CHECKPOINT_KEY] = st.session_state[INPUT_KEY].strip()


with st.sidebar:
    st.title("🔎 State Lens")
    st.text_input(
        "Checkpoint path",
        key=INPUT_KEY,
        on_change=_typed,
        help="The folder the streaming query was started with as checkpointLocation.",
    )
    samples = sample_checkpoints()
    if samples:
        st.caption("Bundled samples")
        cols = st.columns(2)
        for i, (name, path) in enumerate(samples.items()):
            cols[i % 2].button(name, key=f"sample-{name}", on_click=_pick, args=(path,), width="stretch")

nav = st.navigation(
    {
        "Checkpoint": [
            st.Page("pages/overview.py", title="Overview", icon="📈", default=True),
            st.Page("pages/operators.py", title="Operators and stores", icon="🧩"),
        ],
        "State": [
            st.Page("pages/browser.py", title="State browser", icon="🗂️"),
            st.Page("pages/sql.py", title="SQL", icon="🦆"),
        ],
    }
)
nav.run()
