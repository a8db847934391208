"""Results as HTML for notebooks (Jupyter, Databricks): what the app's pages show, as one fragment.

Each fragment stands alone (its style inside it: a notebook shows outputs in iframes or side by
side); charts are the app's Plotly figures, drawn by plotly.js from its CDN, or embedded whole with
``statelens.config.plotly_js = "inline"`` (a notebook that cannot reach cdn.plot.ly).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

STYLE = (
    "<style>.statelens{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:13px;line-height:1.4}"
    ".statelens h3{margin:.2em 0 .3em;font-size:15px}.statelens .sl-sub{color:#666;margin:.2em 0}"
    ".statelens table.sl-table{border-collapse:collapse;margin:.4em 0}"
    ".statelens table.sl-table td,.statelens table.sl-table th{border:1px solid #ddd;padding:.2em .5em;text-align:left;"
    "vertical-align:top}.statelens .sl-finding{border-left:4px solid #d9822b;background:#fff8f0;padding:.3em .6em;margin:.3em 0}"
    ".statelens .sl-finding.info{border-color:#4a90d9;background:#f3f8fe}"
    ".statelens .sl-finding.error{border-color:#c62828;background:#fdecea}"
    ".statelens .sl-ok{border-left:4px solid #2e9e44;background:#f1faf3;padding:.3em .6em}"
    ".statelens pre{white-space:pre-wrap;background:#f6f6f6;padding:.3em}</style>"
)
MAX_ROWS_SHOWN = 50  # rows of a table drawn in the notebook; to_pandas() has them all


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def card(title: str, summary: Iterable[str] = (), body: Iterable[str] = (), figures: Iterable[tuple[str, Any]] = ()) -> str:
    """One result: a title, lines of summary (text), then body fragments (HTML) and charts."""
    lines = "".join(f"<p class='sl-sub'>{esc(s)}</p>" for s in summary)
    return f"<div class='statelens'>{STYLE}<h3>{esc(title)}</h3>{lines}{''.join(body)}{figures_html(list(figures))}</div>"


def table(head: list[str], rows: list[list[Any]], total: int | None = None) -> str:
    """A table of text cells (escaped here), cut at MAX_ROWS_SHOWN with a line saying so."""
    from statelens.analysis.charts.flow import table_html

    shown = rows[:MAX_ROWS_SHOWN]
    total = len(rows) if total is None else total
    more = (
        f"<p class='sl-sub'>{len(shown):,} of {total:,} rows shown: .to_pandas() has them all.</p>" if total > len(shown) else ""
    )
    return table_html([esc(h) for h in head], [[esc(c) for c in r] for r in shown]) + more


def arrow_table(t: Any, total: int | None = None) -> str:
    """A pyarrow table's first rows (nested values as text)."""
    head = t.slice(0, MAX_ROWS_SHOWN).to_pylist()
    return (
        table(t.column_names, [list(r.values()) for r in head], total if total is not None else t.num_rows)
        if t.num_columns
        else ""
    )


def findings(items: list[Any]) -> str:
    """The health findings (severity, code, message, setting)."""
    if not items:
        return "<div class='sl-ok'>No warnings.</div>"
    out = []
    for f in items:
        setting = f"<br>Setting: <code>{esc(f.setting)}</code>" if f.setting else ""
        out.append(
            f"<div class='sl-finding {esc(f.severity)}'><b>{esc(f.code)}</b> ({esc(f.severity)}): {esc(f.message)}{setting}</div>"
        )
    return "".join(out)


def problems(items: list[Any]) -> str:
    """The doctor's problems (severity, title, what it means, what to do)."""
    if not items:
        return "<div class='sl-ok'>No problems found.</div>"
    return "".join(
        f"<div class='sl-finding {esc(p.severity)}'><b>{esc(p.title)}</b> ({esc(p.severity)})<br>"
        f"What it means: {esc(p.meaning)}<br>What to do: {esc(p.action)}</div>"
        for p in items
    )


def key_answer(r: Any) -> str:
    """One key's why-missing answer: its outcome badge and cause, the sentence a user reads first, the
    operator's verdict, then the flow."""
    from statelens.analysis.charts.flow import NEAR_STYLE, badge_html, fate_html, shown_key
    from statelens.analysis.fate.outcome import WORDS

    if r.whole_query:
        style = (NEAR_STYLE.get(r.outcome, ("gray", r.outcome))[0], WORDS.get(r.outcome, r.outcome))
        at = r.cause_at or {}
        where = ", ".join(
            f"{word} {at[k]}"
            for k, word in (("operator_id", "operator"), ("batch_id", "batch"), ("side", "side"))
            if at.get(k) is not None
        )
        cause = f" · {esc(r.cause.replace('_', ' '))}" + (f" ({esc(where)})" if where else "") if r.cause else ""
        head = f"<p>{badge_html(style)} <code>{esc(shown_key(r.key))}</code>{cause}</p>"
        first, summary = r.fate.headline, r.fate.summary
        lines = "".join(f"<p>{t}</p>" for t in (f"<b>{esc(first)}</b>" if first else "", esc(summary)) if t)
        verdict = (
            f"<p class='sl-sub'>Operator {esc(r.verdict_operator)}'s verdict: {esc(r.verdict)}. {esc(r.verdict_explanation)}</p>"
        )
        return head + lines + verdict + fate_html(r.fate)
    side = f" ({esc(r.side_text)})" if r.side else ""
    out = f"<p><code>{esc(shown_key(r.key))}</code>: <b>{esc(r.verdict)}</b>{side}</p><p>{esc(r.explanation)}</p>"
    if r.evidence:
        cols = list(dict.fromkeys(c for row in r.evidence for c in row))
        out += "<p><b>Evidence</b></p>" + table(cols, [[row.get(c) for c in cols] for row in r.evidence])
    if r.near_misses:
        out += (
            "<p><b>Near misses:</b> "
            + ", ".join(f"<code>{esc(n['key'])}</code> ({esc(n['reason'])}; {esc(n['where'])})" for n in r.near_misses)
            + "</p>"
        )
    return out


def figures_html(figures: list[tuple[str, Any]]) -> str:
    from statelens import config

    out = []
    for i, (name, fig) in enumerate(figures):
        include: Any = False if i else ("cdn" if config.plotly_js == "cdn" else True)
        out.append(
            f"<p><b>{esc(name)}</b></p>"
            + fig.to_html(full_html=False, include_plotlyjs=include, config={"displaylogo": False, "responsive": True})
        )
    return "".join(out)
