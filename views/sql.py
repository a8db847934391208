"""SQL: DuckDB over the loaded state tables, with examples, a result grid and downloads."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import streamlit as st

import statelens
from statelens.analysis.charts.export import display_table, to_csv_bytes, to_parquet_bytes
from statelens.analysis.charts.pipeline import health
from statelens.views.common import (
    audited,
    cached,
    checkpoint_info,
    current_tz,
    grid_height,
    guard,
    pipeline_cached,
    pipeline_root,
    sample_data_root,
    sql_across_cached,
    with_progress,
    workspace,
)

try:  # an offline code editor (react-ace); a plain text area when it is not installed
    from code_editor import code_editor
except ImportError:  # pragma: no cover
    code_editor = None

SQL_KEY = "sql_text"
RUN_BUTTON = {
    "name": "Run",
    "feather": "Play",
    "primary": True,
    "hasText": True,
    "showWithIcon": True,
    "commands": ["submit"],
    "alwaysOn": True,  # shown without hovering over the editor
    "style": {"bottom": "0.44rem", "right": "0.4rem"},
}
MAX_ROWS = 100_000
YOURS = "(your query)"


def loaded_where(t: Any) -> str:
    """Where a loaded table's rows are: memory (its keys alone, or whole), or Parquet on disk."""
    if t.spilled:
        return "Parquet on disk"
    return "memory, keys only" if t.keys_only else "memory"


def _example_select_key(text: str) -> str:
    return "sql_example_" + hashlib.sha1(text.encode()).hexdigest()[:12]


def _pick_example(examples: dict[str, str], select_key: str) -> None:
    """Runs before the page: the editor then opens with the picked example's text.

    Only a pick from the select shown beside the text the editor holds counts: a page can still
    send the value of a select it showed for an earlier text (seen with a Run click right after
    typing), and taking that for a pick would replace the typed query with an example and run it.
    """
    if select_key != _example_select_key(st.session_state.get(SQL_KEY, "")):
        return
    name = st.session_state.get(select_key)
    if name in examples:
        st.session_state[SQL_KEY] = examples[name]


def _schema(name: str) -> str:
    return name if name.isidentifier() else '"' + name.replace('"', '""') + '"'


def across_pipeline(root: str) -> None:
    """Given a root of several checkpoints: one DuckDB catalog, a schema per query (``silver.op0``),
    each at its query's last committed batch (``statelens.sql_across``). Linkable: ?checkpoint=ROOT&sql=...&data_root=DIR
    (where the tables are now: the hops between the queries, hence their order)"""
    pipeline = pipeline_cached(root, st.query_params.get("data_root") or sample_data_root(root) or None)
    stateful = [n for n in pipeline.order() if pipeline.query(n).state_bytes and health(pipeline.query(n)) != "superseded"]
    st.caption(
        f"{root} holds several checkpoints: each query is a schema ("
        + ", ".join(_schema(q) for q in pipeline.order())
        + ") holding its own SQL page's tables (op0, op0_changes, a join's sides ...), each at its last committed batch."
    )
    if "sql_across_text" not in st.session_state:
        st.session_state["sql_across_text"] = (
            st.query_params.get("sql")
            or "\nUNION ALL\n".join(f"SELECT '{q}' AS query, count(*) AS state_rows FROM {_schema(q)}.op0" for q in stateful)
            or "SELECT 1"
        )
        st.session_state["sql_autorun"] = bool(st.query_params.get("sql"))
    st.text_area("Query", key="sql_across_text", height=180)
    if st.button("Run", type="primary", key="sql_run") or st.session_state.pop("sql_autorun", False):
        sql = st.session_state["sql_across_text"]
        st.query_params.update({"checkpoint": root, "sql": sql})
        rows = with_progress(
            "Loading the tables the query names, then running it",
            lambda: sql_across_cached(root, sql, None, MAX_ROWS),
            "sql",
        )
        cut = f" (cut at {MAX_ROWS:,} rows)" if rows.truncated else ""
        st.caption(f"**{rows.table.num_rows:,} rows**{cut} · {rows.title}")
        st.dataframe(
            display_table(rows.table, current_tz()),
            hide_index=True,
            width="stretch",
            height=grid_height(rows.table.num_rows, 480),
        )
        for label, convert, mime in (
            ("CSV", to_csv_bytes, "text/csv"),
            ("Parquet", to_parquet_bytes, "application/octet-stream"),
        ):
            file = f"statelens-pipeline-query.{label.lower()}"
            st.download_button(
                label,
                audited(functools.partial(convert, rows.table), file),
                file,
                mime,
                key=f"dl_{label.lower()}",
                on_click="ignore",
            )


st.header("SQL")
pipeline_at = pipeline_root()  # a root holding several checkpoints: its pipeline's questions
if pipeline_at:
    with guard():
        across_pipeline(pipeline_at)
info: Any = None if pipeline_at else checkpoint_info()
if info is not None:
    committed = [b.batch_id for b in info.committed_batches]
    if not info.operators or not committed:
        st.info("This checkpoint has no committed state to query.")
    else:
        examples = cached(info.path).example_queries()
        c1, c2, c3 = st.columns([4, 1, 1])
        linked = st.query_params.get("batch", "")
        if "sql_batch" not in st.session_state and linked.isdigit() and int(linked) in committed:
            st.session_state["sql_batch"] = int(linked)
        batch = c2.selectbox("Batch", committed[::-1], key="sql_batch", help="State tables load at this batch.")
        plain = c3.toggle("Plain editor", value=code_editor is None, disabled=code_editor is None, key="sql_plain")

        # a shared link carries the query (?sql=...&batch=N) and runs it once on open
        if SQL_KEY not in st.session_state and st.query_params.get("sql"):
            st.session_state[SQL_KEY] = st.query_params["sql"]
            st.session_state["sql_autorun"] = True
        st.session_state.setdefault(SQL_KEY, next(iter(examples.values()), "SELECT 1"))

        submitted = False
        if plain or code_editor is None:
            st.text_area("Query", key=SQL_KEY, height=220)
        else:
            # Run lives inside the editor (and Ctrl+Enter): it sends the text as it is at the click. A
            # button outside raced the editor's debounced updates (running the text of 100 ms before),
            # and a debounced update arriving after the click restarted the page and dropped the run:
            # the editor reports only on Run. One editor for the page's life: a picked example replaces
            # its text (allow_reset), no second editor mounts beside the first.
            resp = code_editor(
                st.session_state[SQL_KEY],
                lang="sql",
                height=[10, 24],
                response_mode="default",
                buttons=[RUN_BUTTON],
                options={"wrap": True},
                allow_reset=True,
                key="sql_editor",
            )
            st.caption("Run: the button in the editor, or Ctrl+Enter.")
            if resp and resp.get("text") and resp.get("id"):
                st.session_state[SQL_KEY] = resp["text"]
                if resp.get("type") == "submit" and resp["id"] != st.session_state.get("_sql_submit_id"):
                    st.session_state["_sql_submit_id"] = resp["id"]
                    submitted = True
        # the example select names the example the editor holds. Its key follows the text, so a
        # changed text shows a fresh select, and a select value a page still sends from before
        # (a click while the page reran) is never taken for a pick.
        held = next((name for name, text in examples.items() if text.strip() == st.session_state[SQL_KEY].strip()), YOURS)
        options = [YOURS, *examples]
        select_key = _example_select_key(st.session_state[SQL_KEY])
        c1.selectbox(
            "Example queries",
            options,
            index=options.index(held),
            key=select_key,
            on_change=_pick_example,
            args=(examples, select_key),
        )

        with st.expander("Loading: row budget, filters, spill to Parquet"):
            l1, l2, l3 = st.columns([1, 2, 1])
            budget = l1.number_input(
                "Row budget per table", min_value=1, value=int(statelens.limits()["row_budget"]), step=100_000, key="sql_budget"
            )
            parts_avail = list(range(max((s.num_partitions for o in info.operators for s in o.stores), default=0)))
            parts = l2.multiselect(
                "Only these partitions",
                parts_avail,
                key="sql_parts",
                help="Tables load only these state partitions: the native reader reads only their files; through Spark "
                "the filter runs inside Spark before anything is collected.",
            )
            spill = l3.toggle(
                "Spill past the budget",
                key="sql_spill",
                help="Tables past the budget go to Parquet; DuckDB reads them from disk.",
            )
        ws = None
        with guard():
            ws = workspace(info.path, batch, int(budget), tuple(parts), spill)
        if ws is not None:
            tables_box = st.container()  # filled after the run, so its count includes what the run loaded
            run_key = (info.path, ws.batch)
            clicked = st.button("Run", type="primary", key="sql_run") if plain or code_editor is None else False
            if clicked or submitted or st.session_state.pop("sql_autorun", False):
                st.session_state.pop("sql_result", None)
                with guard():
                    sql = st.session_state[SQL_KEY]
                    result = with_progress(
                        "Loading the tables the query names, then running it",
                        functools.partial(ws.execute, sql, max_rows=MAX_ROWS),
                        "sql",
                    )
                    st.session_state["sql_result"] = (run_key, sql, result)
                    st.query_params.update({"checkpoint": info.path, "batch": str(ws.batch), "sql": sql})
            with tables_box.expander(f"Tables at batch {ws.batch} ({len(ws.loaded)} loaded)"):
                st.caption(
                    "A table loads the first time a query names it (its keys alone while the queries read no value). "
                    + ws.tables_hint()
                )
                st.dataframe(
                    [
                        {
                            "table": s.name,
                            "reads": s.describe(),
                            "rows": ws.loaded[k].rows if k in ws.loaded else None,
                            "in": loaded_where(ws.loaded[k]) if k in ws.loaded else "",
                        }
                        for k, s in ws.specs.items()
                    ],
                    hide_index=True,
                    width="stretch",
                )
            stored = st.session_state.get("sql_result")
            if stored is not None and stored[0] == run_key:
                _, ran, result = stored
                cut = f" (cut at {MAX_ROWS:,} rows)" if result.truncated else ""
                st.caption(f"**{result.table.num_rows:,} rows**{cut} · {result.seconds * 1000:.0f} ms")
                with st.expander("The query that produced this result (this page's URL links to it)"):
                    st.code(ran, language="sql", wrap_lines=True)
                st.dataframe(
                    display_table(result.table, current_tz()),
                    hide_index=True,
                    width="stretch",
                    height=grid_height(result.table.num_rows, 480),
                )
                d1, d2, _ = st.columns([1, 1, 4])
                with guard():
                    table = result.table
                    for col, label, convert, mime in (
                        (d1, "CSV", to_csv_bytes, "text/csv"),
                        (d2, "Parquet", to_parquet_bytes, "application/octet-stream"),
                    ):
                        file = f"statelens-query.{label.lower()}"
                        col.download_button(
                            label,
                            audited(functools.partial(convert, table), file),
                            file,
                            mime,
                            key=f"dl_{label.lower()}",
                            on_click="ignore",
                        )
