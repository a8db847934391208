"""A key's fate drawn as a flow (the why-missing page's whole-query answer): input -> each operator ->
output, one row per input record and one per window or row that reached the output or still waits,
coloured by outcome, each step's evidence (the input line, the state rows, the progress figures)
a click away."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from statelens.analysis.charts.export import display_rows
from statelens.analysis.charts.flow import STEP_STYLE, flow_rows, near_rows, outputs_rows, visible, where_text
from statelens.views.common import grid_height

__all__ = ["render_fate", "visible"]


def _badge(style: tuple[str, str], suffix: str = "") -> str:
    color, label = style
    return f":{color}-badge[{label}{suffix}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_fate(fate: Any, tz: str, said: str | None = None) -> None:
    """The flow of one key: a table of its records through the operators, then its outputs and what waits.
    ``said``: the note on the query's input already shown above every key (not repeated under each)."""
    if fate.input_note and fate.input_note != said:
        st.caption(f"Input: {fate.input_note}")
    where = where_text(fate, code=lambda text: f"`{text}`")
    if where:
        st.caption(f"Where: {where}")
    ops, rows = flow_rows(fate)
    if rows:
        head = ["input record", *(f"operator {o}" for o in ops), "output"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for label, per_op, out in rows:
            cells = [_cell(label), *(" ".join(_badge(s) for s in steps) or "·" for steps in per_op)]
            cells.append(" ".join(_badge(s) for s in out) or "·")
            lines.append("| " + " | ".join(cells) + " |")
        st.markdown("\n".join(lines))
    outs = outputs_rows(fate)
    if outs:
        st.dataframe(
            outs,
            hide_index=True,
            width="stretch",
            height=grid_height(len(outs), 420),
            column_config={"batch": st.column_config.NumberColumn("batch", format="%d")},
        )
    if fate.near_fates:
        lines = [
            f"- `{key}` ({reason}; {where}): {_badge(style, batches)}{files}"
            for key, reason, where, style, batches, files in near_rows(fate)
        ]
        st.markdown("**Near misses, followed as keys of their own:**\n" + "\n".join(lines))
    elif fate.near:
        st.markdown(
            "**Near misses in the input:** "
            + ", ".join(f"`{visible(r.values.get(r.column))}` ({r.near}; {r.source}, {r.where()})" for r in fate.near[:8])
        )
    for note in fate.notes:
        st.caption(note)
    if fate.records:
        with st.expander(f"Each record's evidence ({len(fate.records)})"):
            for i, rf in enumerate(fate.records):
                st.markdown(f"**{rf.record.source} · batch {rf.record.batch_id} · {rf.record.file_name}, row {rf.record.row}**")
                st.code(json.dumps(rf.record.values, default=str, ensure_ascii=False), language="json", wrap_lines=True)
                for s in rf.steps:
                    st.markdown(f"{_badge(STEP_STYLE.get(s.outcome, ('gray', s.outcome)))} {s.detail}")
                    if s.evidence:
                        shown = display_rows(s.evidence, tz)
                        st.dataframe(
                            shown,
                            hide_index=True,
                            width="stretch",
                            height=grid_height(len(shown)),
                            key=f"ev-{fate.key}-{i}-{s.operator_id}-{s.batch}",
                        )
