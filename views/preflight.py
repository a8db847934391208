"""Before a change: will the changed query restart on this checkpoint? The changed job's script and
arguments run as ``statelens preflight`` runs them: against a scratch copy of the checkpoint, into
Spark's noop sink, for the batch the query would run next; Spark's own checks give the verdict."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import streamlit as st

import statelens
from statelens.views import auth
from statelens.views.common import checkpoint_info, current_event_log, guard, metric_row, opened

st.header("Will my change restart?")
st.caption(
    "Give the changed job's script and its arguments as you deploy it. It runs here, with this app's Python, against a "
    "scratch copy of the checkpoint: the query starts into Spark's noop sink for the one batch it would run next "
    "(its foreachBatch function is never called, its tables and files are not written), and Spark's own restart "
    "checks decide. The checkpoint is only read."
)
info = checkpoint_info()
who = auth.current()
if info is not None:
    if who is None:
        script = st.text_input("The changed job's script", placeholder="/path/to/job.py", key="pf_script").strip()
    else:  # a shared server: the jobs the access policy names for the user's groups, nothing else
        scripts = [s for j in who.jobs for s in j.scripts()]
        script = st.selectbox("The changed job's script", scripts, key="pf_script", placeholder="none allowed") or ""
        rules = {j.describe(): ", ".join(j.args) or "none" for j in who.jobs}
        st.caption(
            "The jobs your groups may run, as the access policy names them; the arguments each may be given: "
            + ("; ".join(f"`{k}`: `{v}`" for k, v in rules.items()) or "none")
            + ". It runs in its script's folder, and an argument naming a path must name one you may open."
        )
    arguments = st.text_input(
        "Its arguments", placeholder="--checkpoint s3://lake/cp/orders --input s3://lake/in", key="pf_args"
    ).strip()
    folder = (
        st.text_input("Run it in the folder", value=str(Path.cwd()), key="pf_cwd").strip()
        if who is None
        else str(Path(script).parent)
    )
    asked = (info.path, script, arguments, folder, current_event_log())
    if st.button("Check before deploying", type="primary", disabled=not script, key="pf_go"):
        auth.record("job", job="preflight", script=script, args=arguments, checkpoint=info.path, target=None)
        with guard():
            if not script.endswith(".py") or not Path(script).is_file():
                raise statelens.InvalidInput(f"{script} is not a Python script here: give the path of the job's .py file.")
            with st.spinner("Running the changed job on a scratch copy of the checkpoint (its Spark starts first)…"):
                st.session_state["pf_result"] = (
                    asked,
                    opened(info.path)
                    .preflight([sys.executable, script, *shlex.split(arguments)], current_event_log(), cwd=folder or None)
                    .report,
                )
    done = st.session_state.get("pf_result")
    if done is not None and done[0] == asked:
        r = done[1]  # analysis.checkpoint.change.Preflight
        if r.verdict == "restarts":
            st.success(f"**Restarts.** {r.title}")
        else:
            st.error(f"**Fails: `{r.error_class}`.** {r.title}")
        metric_row(
            [
                ("Verdict", r.verdict, "Spark's own: its restart checks ran on the batch the query runs next."),
                ("Batch", r.batch, "New data" if r.new_data else "No new data: the next batch without it"),
                ("Warnings", len(r.warnings), "What restarts but behaves otherwise than you may expect."),
            ]
        )
        if r.stored_schema is not None and r.new_schema is not None:
            marks = {d["position"]: d["change"] for d in r.differences if "position" in d}
            n = max(len(r.stored_schema), len(r.new_schema))
            st.markdown(f"**The {r.schema_part} schema, field by field** (Spark compares by position)")
            st.dataframe(
                [
                    {  # the change first: the one column that answers stays in view at any width
                        "position": i,
                        "change": marks.get(i, ""),
                        "stored": r.stored_schema[i].readable() if i < len(r.stored_schema) else "",
                        "new": r.new_schema[i].readable() if i < len(r.new_schema) else "",
                    }
                    for i in range(n)
                ],
                hide_index=True,
                width="stretch",
                column_config={
                    "position": st.column_config.NumberColumn(width="small"),
                    "change": st.column_config.TextColumn(width="small"),
                },
            )
        elif r.differences:
            st.markdown("**What changed**\n" + "\n".join(f"- {d['change']}" for d in r.differences))
        for w in r.warnings:
            st.warning(f"**{w.kind}**: {w.detail}")
        if r.ways_out:
            st.markdown("**Ways out**\n" + "\n".join(f"- {w}" for w in r.ways_out))
        for title, items in (
            ("Not compared", r.not_checked),
            ("The job's writes, not made", r.skipped_writes),
            ("The job's other queries, not started", r.other_queries),
        ):
            if items:
                st.caption(f"{title}: " + "; ".join(items))
        if r.verdict == "fails":
            st.markdown(
                "**Rebuild the state for the changed job**: the checkpoint's batches replayed with the changed job into a "
                "new checkpoint (the same input, offsets and watermarks; Spark writes the state; the job's output is not "
                "written), so that the changed job continues where the old one stopped."
            )
            target = st.text_input("The new checkpoint", placeholder=f"{info.path}-v2", key="rb_to").strip()
            sink_to = st.text_input(
                "A new folder for its file sink (optional)",
                key="rb_sink_to",
                help="Prepared so the changed job writes there from its next batch: its _spark_metadata log gets an entry "
                "for every batch before, as Spark's file sink log needs at its compactions. Empty: keep the old sink folder.",
            ).strip()
            accept = st.checkbox("Rebuild although the watermark delay changed", key="rb_accept_wm")
            if st.button("Rebuild the state", disabled=not target, key="rb_go"):
                auth.record(
                    "job", job="rebuild", script=script, args=arguments, checkpoint=info.path, target=target, sink_to=sink_to
                )
                with guard():
                    bar = st.progress(0.0, text="Starting the changed job (its Spark starts first)…")

                    def step(n: int, of: int, batch: int, rows: int) -> None:
                        bar.progress(n / of, text=f"Batch {n} of {of} replayed (batch {batch}, {rows:,} input rows)")

                    st.session_state["rb_result"] = (
                        asked,
                        opened(info.path)
                        .rebuild(
                            target,
                            [sys.executable, script, *shlex.split(arguments)],
                            event_log=current_event_log(),
                            accept_watermark_change=accept,
                            progress=step,
                            cwd=folder or None,
                            sink_to=sink_to or None,
                        )
                        .report,
                    )
            rebuilt = st.session_state.get("rb_result")
            if rebuilt is not None and rebuilt[0] == asked:
                b = rebuilt[1]  # analysis.checkpoint.rebuild.Rebuild
                (st.success if b.check.verdict == "restarts" else st.error)(
                    f"**Rebuilt {len(b.batches)} batches into `{b.to}`** in {b.seconds:.1f} s. The changed job on it: "
                    f"**{b.check.verdict}**. {b.check.title}"
                )
                st.dataframe(
                    [
                        {
                            "operator": o.operator_id,
                            "rows before": o.old_rows,
                            "rows now": o.new_rows,
                            "keys before": o.old_keys,
                            "keys now": o.new_keys,
                        }
                        for o in b.operators
                    ],
                    hide_index=True,
                )
                for w in b.accepted:
                    st.warning(f"**accepted, {w.kind}**: {w.detail}")
                st.markdown("**Next**\n" + "\n".join(f"- {s}" for s in b.next_steps))
