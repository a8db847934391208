"""The one-file HTML health report of a checkpoint: summary, every finding, every chart.

Self-contained: plotly.js is embedded once, so the file opens offline and can be attached
to an incident ticket.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import gzip
import html
from typing import Any

from statelens.analysis.charts.flow import shown_key
from statelens.analysis.checkpoint.health import Finding

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1150px;color:#222}
h1{margin-bottom:.2rem} .sub{color:#666;margin-top:0}
table{border-collapse:collapse;margin:.5rem 0 1.5rem} td,th{border:1px solid #ddd;padding:.3rem .6rem;text-align:left}
.finding{border-left:5px solid #d9822b;background:#fff8f0;padding:.5rem .8rem;margin:.5rem 0}
.finding.info{border-color:#4a90d9;background:#f3f8fe} code{background:#f2f2f2;padding:0 .2rem}
.ok{border-left:5px solid #2e9e44;background:#f1faf3;padding:.5rem .8rem}
"""


def _finding_html(f: Finding) -> str:
    setting = f"<br>Setting: <code>{html.escape(f.setting)}</code>" if f.setting else ""
    return (
        f'<div class="finding {html.escape(f.severity)}"><b>{html.escape(f.code)}</b> '
        f"({html.escape(f.severity)}): {html.escape(f.message)}{setting}</div>"
    )


def _answers_html(answers: list[Any]) -> str:
    """Why each key is missing: what reached the output, the root cause, where and when, the first sentence."""
    rows = []
    for a in answers:
        at = {**(a.cause_at or {})}
        if at.get("file"):
            at["file"] = str(at["file"]).rsplit("/", 1)[-1]
        where = ", ".join(
            f"{word} {html.escape(str(at[k]))}"
            for k, word in (
                ("operator_id", "operator"),
                ("batch_id", "batch"),
                ("side", "side"),
                ("file", "file"),
                ("row", "row"),
            )
            if at.get(k) is not None
        )
        first = a.fate.headline if a.fate is not None and a.fate.headline else a.explanation
        rows.append(
            f"<tr><td><code>{html.escape(shown_key(a.key))}</code></td><td>{html.escape(str(a.outcome or a.verdict))}</td>"
            f"<td>{html.escape(str(a.cause or ''))}</td><td>{where}</td><td>{html.escape(first)}</td></tr>"
        )
    head = "<tr><th>key</th><th>outcome</th><th>cause</th><th>where</th><th>the answer</th></tr>"
    return f"<h2>Why these keys are missing</h2><table>{head}{''.join(rows)}</table>"


def health_report_html(
    title: str, summary: dict[str, Any], findings: list[Finding], figures: list[tuple[str, Any]], answers: list[Any] | None = None
) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in summary.items())
    warnings = [f for f in findings if f.severity == "warning"]
    verdict = (
        f"<p>{len(warnings)} warning(s), {len(findings) - len(warnings)} note(s).</p>"
        if warnings
        else '<div class="ok">No warnings: the state looks healthy.</div>'
    )
    charts = []
    for i, (name, fig) in enumerate(figures):
        spec = fig.to_json().replace("</", "<\\/")  # (a JSON text inside a script element)
        charts.append(
            f"<h3>{html.escape(name)}</h3><div class='chart' data-figure='fig-{i}'></div>"
            f"<script type='application/json' id='fig-{i}'>{spec}</script>"
        )
    script = _plotly_loader() if figures else ""
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class='sub'>State Lens health report, generated {generated}</p>"
        f"<h2>Summary</h2><table>{rows}</table>"
        f"{_answers_html(answers) if answers else ''}"
        f"<h2>Findings</h2>{verdict}{''.join(_finding_html(f) for f in findings)}"
        f"<h2>Charts</h2>{''.join(charts)}{script}"
        "</body></html>"
    )


@functools.lru_cache(maxsize=1)
def _plotly_loader() -> str:
    """plotly.js, gzip-compressed inside the file (4.8 MB -> 2 MB: the report opens offline), unpacked
    by the browser's own DecompressionStream, then each chart drawn from its JSON."""
    from plotly.offline import get_plotlyjs

    packed = base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()
    return (
        f"<script type='application/octet-stream' id='plotly-gz'>{packed}</script>"
        "<script>(async () => {"
        "const text = atob(document.getElementById('plotly-gz').textContent);"
        "const bytes = new Uint8Array(text.length);"
        "for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);"
        "const js = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();"
        "(0, eval)(js);"
        "for (const el of document.querySelectorAll('div[data-figure]')) {"
        "const fig = JSON.parse(document.getElementById(el.dataset.figure).textContent);"
        "Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});"
        "}})();</script>"
    )


def checkup_figures(batches: list[Any], skews: list[Any], stores: list[Any], progress: Any = None) -> list[tuple[str, Any]]:
    """Every chart of a health check, titled, in report order (``progress``: a ProgressLog or None)."""
    from statelens.analysis.charts import charts

    figs: list[tuple[str, Any]] = [("Watermark", charts.watermark_figure(batches))]
    if progress is not None:
        figs += [
            ("Late rows dropped by the watermark", charts.late_rows_figure(progress)),
            ("Input per batch", charts.rates_figure(progress)),
            ("Batch duration by phase", charts.durations_figure(progress)),
            ("State memory against rows", charts.memory_figure(progress)),
        ]
    if stores:
        figs.append(("Growth", charts.growth_figure(stores)))
    for s in skews:
        figs.append((f"Skew: operator {s.operator_id} {s.store_name}", charts.skew_figure(s)))
        g = next((g for g in stores if g.operator_id == s.operator_id and g.store_name == s.store_name), None)
        if g is not None:
            figs.append(
                (
                    f"Skew over time: operator {s.operator_id} {s.store_name}",
                    charts.skew_heatmap_figure(g, len(s.rows_by_partition)),
                )
            )
    return figs


def checkup_report(
    info: Any,
    skews: list[Any],
    stores: list[Any],
    findings: list[Finding],
    progress: Any = None,
    doctor: Any = None,
    answers: list[Any] | None = None,
) -> str:
    """The health report of a checkpoint (``info`` a CheckpointInfo, the rest from spark_io.gather.checkup;
    ``progress`` the query's ProgressLog when an event log was given; ``doctor`` its DoctorReport;
    ``answers``: why-missing results of keys asked about, first)."""
    from statelens.analysis.checkpoint.health import counted_stores_text, rows_in_state

    summary = {
        "checkpoint": info.path,
        "query id": info.query_id,
        "batches": f"{len(info.batches)} ({len(info.committed_batches)} committed, last {info.last_committed})",
        "watermark": dt.datetime.fromtimestamp(info.batches[-1].watermark_ms / 1000, dt.UTC).isoformat()
        if info.batches and info.batches[-1].watermark_ms
        else "none",
        "provider": info.provider,
        "shuffle partitions": info.conf.get("spark.sql.shuffle.partitions", "?"),
        "operators": ", ".join(f"{o.operator_id}: {o.operator_name}" for o in info.operators),
        "rows in state": f"{rows_in_state(stores):,} ({counted_stores_text(stores)})",
        "progress": f"{progress.format}: {progress.location}" if progress is not None else "none (no event log given)",
    }
    if doctor is not None:
        summary["checkpoint doctor"] = "; ".join(f"{p.severity}: {p.title}" for p in doctor.problems) or "no problems"
        summary["checksums"] = f"{doctor.checksums_verified:,} file(s) verified against their .crc sidecars"
        if doctor.restart_cost:
            worst = doctor.restart_cost[0]
            since = (
                f"after snapshot {worst.snapshot_version}"
                if worst.snapshot_version is not None
                else "from the first version (no snapshot yet)"
            )
            summary["restart reads"] = (
                f"up to {worst.replayed} change file(s) {since} "
                f"(operator {worst.operator_id} {worst.store} partition {worst.partition}, {worst.bytes:,} bytes)"
            )
        fixed = [s.setting for s in doctor.restart_settings if s.may_change == "no" and s.setting.startswith("spark.")]
        summary["fixed by the checkpoint"] = ", ".join(x.removeprefix("spark.sql.") for x in fixed) or "none recorded"
    figures = checkup_figures(info.batches, skews, stores, progress)
    return health_report_html(f"State health: {info.path}", summary, findings, figures, answers)
