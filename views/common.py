"""What every page shares: the chosen checkpoint, cached reads, and the one error renderer.

Pages stay thin: widgets -> a cached read from ``spark_io`` -> an ``analysis`` function ->
a chart -> render. Errors from any of those are ``StateLensError``s and are shown here,
by ``guard()``, as one ``st.error`` with a title and a message.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import re
import zoneinfo
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import plotly.graph_objects as go
import pyarrow as pa
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from analysis.charts.export import figure_bytes, to_csv_bytes
from analysis.checkpoint.doctor import DoctorReport
from analysis.checkpoint.health import SkewReport, human_bytes
from analysis.checkpoint.repartition import RepartitionPreview
from analysis.core.errors import NotAllowed, SparkUnavailable, StateLensError, speaking_as
from analysis.core.model import CheckpointInfo, StateSource
from analysis.core.question import KeyQuestion
from analysis.core.state_access import StateAccess
from analysis.inputs.sources import SourceBatch
from analysis.runs.progress import ProgressLog
from analysis.verdicts import diagnose
from analysis.verdicts.unmatched import UnmatchedReport
from spark_io import storage
from spark_io.gather import checkup, diagnosis, unmatched
from spark_io.gather.arrivals import arrivals_for
from spark_io.gather.workspace import DEFAULT_ROW_BUDGET, TableSpec, Workspace
from spark_io.logs import checkpoint, files
from spark_io.logs.event_logs import log_fingerprint as _log_fingerprint
from spark_io.logs.event_logs import read_progress
from spark_io.readers import engine
from spark_io.readers.access import between_questions, load_state, state_access
from spark_io.readers.state_reader import RowFilter
from spark_io.runtime import jobs, session
from spark_io.storage.locations import check_allowed, is_local
from views import auth

ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = Path(os.environ.get("STATELENS_SAMPLES", ROOT / "sample_checkpoints"))
CHECKPOINT_KEY = "checkpoint"
INPUT_KEY = "checkpoint_input"  # the sidebar's path input: this, then the path's digest


def checkpoint_input_key(path: str) -> str:
    return f"{INPUT_KEY}_{hashlib.sha1(path.encode()).hexdigest()[:12]}"


EVENT_LOG_KEY = "event_log"
TZ_KEY = "tz"
TIMEZONES = ["UTC", *sorted(zoneinfo.available_timezones() - {"UTC"})]
log = logging.getLogger("statelens")
T = TypeVar("T")


def sample_checkpoints() -> dict[str, str]:
    """Bundled samples: name -> path (the pipelines' checkpoints under pipelines/<name>/checkpoint)."""
    if not SAMPLES_DIR.is_dir():
        return {}
    out = {p.name: str(p) for p in sorted(SAMPLES_DIR.iterdir()) if (p / "offsets").is_dir()}
    pipelines = SAMPLES_DIR / "pipelines"
    if pipelines.is_dir():
        out |= {p.name: str(p / "checkpoint") for p in sorted(pipelines.iterdir()) if (p / "checkpoint" / "offsets").is_dir()}
    return out


def samples_folder() -> str:
    return str(SAMPLES_DIR) if SAMPLES_DIR.is_dir() else ""


@st.cache_data(show_spinner="Listing checkpoints…", ttl=30, max_entries=16)
def _checkpoints_under(prefix: str) -> list[Any]:
    from spark_io.gather.fleet import list_checkpoints

    return list_checkpoints(prefix)


def checkpoints_under(prefix: str) -> list[Any]:
    """Every checkpoint under a folder or prefix (``spark_io.gather.fleet``), kept 30 s (the user's
    bounds checked first, every run)."""
    check_allowed(prefix, "folder")
    return _checkpoints_under(prefix)


def _beside(checkpoint_path: str, shared: str, own: str) -> str:
    """What the generator kept beside a bundled sample: ``<shared>/<name>`` for a sample, ``<own>`` in a
    pipeline's folder (pipelines/<name>/checkpoint beside pipelines/<name>/<own>); '' when there is none."""
    p = Path(checkpoint_path)
    if p.parent == SAMPLES_DIR:
        found = SAMPLES_DIR / shared / p.name
    elif p.name == "checkpoint" and p.parent.parent == SAMPLES_DIR / "pipelines":
        found = p.parent / own
    else:
        return ""
    return str(found) if found.exists() and auth.may(str(found)) else ""


def sample_event_log(checkpoint_path: str) -> str:
    """The event log the generator wrote beside a bundled sample, or ''."""
    return _beside(checkpoint_path, "event_logs", "event_log")


def sample_input_root(checkpoint_path: str) -> str:
    """Where the generator kept a bundled sample's input files, or ''."""
    return _beside(checkpoint_path, "inputs", "inputs")


def sample_sink(checkpoint_path: str) -> str:
    """Where the generator kept a bundled sample's file sink, or ''."""
    return _beside(checkpoint_path, "sinks", "sink")


def current_tz() -> str:
    """The time zone times are shown in (sidebar; UTC unless chosen)."""
    tz = str(st.session_state.get(TZ_KEY) or "UTC")
    return tz if tz in TIMEZONES else "UTC"


def current_event_log() -> str | None:
    return str(st.session_state.get(EVENT_LOG_KEY) or "").strip() or None


def default_checkpoint() -> str:
    samples = sample_checkpoints()
    return samples.get("join_hdfs") or next(iter(samples.values()), "")


def current_path() -> str:
    return str(st.session_state.get(CHECKPOINT_KEY, "")).strip()


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Show any failure inside as one st.error, never as a traceback; the page goes on."""
    try:
        yield
    except StateLensError as e:
        if isinstance(e, NotAllowed):
            auth.refused(e.message)
        st.error(f"**{e.title}.** {e.message}")
    except Exception as e:  # a bug: say so plainly, keep the app alive, log the details
        log.exception("unexpected error")
        st.error(f"**Unexpected error.** {type(e).__name__}: {str(e)[:300]}. The app keeps running; please report this.")


@contextlib.contextmanager
def asking() -> Iterator[None]:
    """One run of a page is one question: each remote folder is listed once in it, and downloads from
    object storage that take over a second show a bar above the page (removed when they are done)."""
    bar = st.empty()
    page = contextvars.copy_context()  # the page's own context, outside any cached function

    def show(done: int, total: int, files: int) -> None:
        text = (
            f"Downloading state files: {human_bytes(done)} of {human_bytes(total)} ({files:,} files; kept for the next question)"
        )
        # drawn in the page's context: a download inside a cached function must not become part
        # of what its cache replays (the bar is not the function's output, and is gone by then)
        page.copy().run(bar.progress, min(done / total, 1.0) if total else 0.0, text=text)

    try:
        with storage.question(), storage.downloads.reporting(show), speaking_as("cli"):  # the app names flags as the CLI
            yield
    finally:
        bar.empty()


def fingerprint(path: str) -> tuple[int, int]:
    """Changes when the checkpoint commits a new batch: the key for cached reads. Every cached read
    of a checkpoint asks it first, in the page's run: the signed-in user's bounds are checked here,
    before a cached answer another user asked for could be served."""
    check_allowed(path)
    return files.fingerprint(path)


@st.cache_data(show_spinner=False, max_entries=64)
def _info(path: str, fp: tuple[int, int]) -> CheckpointInfo:
    return checkpoint.read_checkpoint(path)


def checkpoint_info() -> CheckpointInfo | None:
    """The chosen checkpoint's log facts (no JVM); shows the error and returns None if unusable."""
    path = current_path()
    if not path:
        st.info("Choose a checkpoint in the sidebar: type its path or pick a bundled sample.")
        return None
    with guard():
        if is_local(path):
            files.resolve_checkpoint(path)  # fail fast, and never cache a bad path
        return _info(path, fingerprint(path))
    return None


@st.cache_resource(show_spinner=False, max_entries=32)
def _state(
    path: str,
    source: StateSource,
    batch: int | None,
    row_filter: RowFilter | None,
    limit: int | None,
    fp: tuple[int, int],
    engine_name: str,
    keys_only: bool = False,
) -> tuple[pa.Table, int]:
    return engine.read_state(path, source, batch, row_filter=row_filter, limit=limit, keys_only=keys_only)


def read_state_cached(
    path: str,
    source: StateSource,
    batch: int | None,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
    keys_only: bool = False,
) -> tuple[pa.Table, int]:
    """State rows shared by every browser session until the checkpoint commits again."""
    return _state(path, source, batch, row_filter, limit, fingerprint(path), engine.current(), keys_only)


@st.cache_resource(show_spinner=False, max_entries=32)
def _changes(
    path: str,
    source: StateSource,
    end: int,
    row_filter: RowFilter | None,
    limit: int | None,
    start: int | None,
    fp: tuple[int, int],
    engine_name: str,
) -> tuple[pa.Table, int, int]:
    return engine.read_changes(path, source, start=start, end=end, row_filter=row_filter, limit=limit)


def read_changes_cached(
    path: str,
    source: StateSource,
    end: int,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
    start: int | None = None,
) -> tuple[pa.Table, int, int]:
    return _changes(path, source, end, row_filter, limit, start, fingerprint(path), engine.current())


@st.cache_resource(show_spinner=False, max_entries=8)
def _state_metadata(path: str, fp: tuple[int, int], engine_name: str) -> pa.Table:
    return engine.read_state_metadata(path)


def read_state_metadata_cached(path: str) -> pa.Table:
    """Spark's state-metadata table: from the operator metadata files natively, else through Spark."""
    return _state_metadata(path, fingerprint(path), engine.current())


@st.cache_data(show_spinner=False, max_entries=64)
def _key_fields(path: str, operator_id: int, fp: tuple[int, int], engine_name: str) -> dict[str, str]:
    info = _info(path, fp)
    batch = info.last_committed
    # natively, through the state the page's questions at the newest batch read: a join's key
    # columns, read when the page opens, are kept for the first answer. Through Spark the columns
    # would cost a job per side before any question: the answer names them instead.
    if not engine.wants_native(info) or batch is None:
        return diagnosis.key_field_labels(info, operator_id, columns=False)
    return diagnosis.key_field_labels(info, operator_id, _loaded_state(path, operator_id, batch, fp, engine_name))


def key_fields_cached(path: str, operator_id: int) -> dict[str, str]:
    """Key field -> how it reads (a join's ``field0 (order_id)``), the default field first."""
    return _key_fields(path, operator_id, fingerprint(path), engine.current())


@st.cache_data(show_spinner=False, max_entries=64)
def _diagnose(
    path: str, q: KeyQuestion, fp: tuple[int, int], log_fp: tuple[int, int], engine_name: str
) -> diagnosis.WhyMissingReport:
    assert q.operator is not None and q.batch is not None
    access = _loaded_state(path, q.operator, q.batch, fp, engine_name)
    progress = diagnosis_progress(path, q.event_log)
    info = _info(path, fp)
    arrivals = arrivals_for(info, list(q.keys), q.operator, q.event_time_ms, progress)
    report = diagnose.why_missing(access, info, q, progress=progress, arrivals=arrivals)
    between_questions(access)
    return report


@st.cache_resource(show_spinner=False, max_entries=4)
def _loaded_state(path: str, operator_id: int, batch: int, fp: tuple[int, int], engine_name: str) -> StateAccess:
    """One operator's state and change feeds at a batch, kept for every key asked after (shared by
    the browser sessions): the native reader's access, or Spark's loaded in memory (read through
    Spark per question when too big)."""
    return load_state(_info(path, fp), operator_id, batch)


@st.cache_data(show_spinner=False, max_entries=64)
def _whole(
    path: str, q: KeyQuestion, fp: tuple[int, int], log_fp: tuple[int, int], engine_name: str
) -> diagnosis.WhyMissingReport:
    from spark_io.gather.fate import why_missing_whole

    # with near misses: after the verdicts alone (the page shows them first), whose input search it reuses
    searched = _whole(path, q.but(near_misses=False), fp, log_fp, engine_name).input_search if q.near_misses else None
    progress = progress_cached(path, q.event_log) if q.event_log else None
    access = _whole_access(path, fp, engine_name)
    report = why_missing_whole(_info(path, fp), q, access, progress=progress, searched=searched)
    between_questions(access)
    return report


@st.cache_resource(show_spinner=False, max_entries=4)
def _whole_access(path: str, fp: tuple[int, int], engine_name: str) -> StateAccess:
    """The state every operator's questions read, kept for the keys asked after (the native reader
    keeps the files it read)."""
    return state_access(_info(path, fp))


def why_missing_cached(path: str, q: KeyQuestion) -> diagnosis.WhyMissingReport:
    """Why-missing's answer to ``q``: the whole query (each key's records from the input files to the
    output), or one operator's verdicts (``q.near_misses=False``: without the look-alike search)."""
    for moved, what in ((q.input_root, "input"), (q.sink, "sink")):
        if moved:
            check_allowed(moved, what)
    fp, log_fp = fingerprint(path), log_fingerprint(q.event_log)
    return (_whole if q.whole_query else _diagnose)(path, q, fp, log_fp, engine.current())


@st.cache_data(show_spinner=False, max_entries=16)
def _fate_columns(path: str, event_log: str | None, fp: tuple[int, int], log_fp: tuple[int, int], engine_name: str) -> list[str]:
    from spark_io.gather.fate import key_columns_of

    progress = progress_cached(path, event_log) if event_log else None
    return key_columns_of(_info(path, fp), _whole_access(path, fp, engine_name), progress)


def fate_columns_cached(path: str, event_log: str | None) -> list[str]:
    """The input columns a key may be in (every operator's key columns, operator 0's first)."""
    return _fate_columns(path, event_log, fingerprint(path), log_fingerprint(event_log), engine.current())


@st.cache_data(show_spinner=False, max_entries=16)
def _unmatched(
    path: str,
    operator_id: int,
    batch: int,
    join_type: str | None,
    event_log: str | None,
    fp: tuple[int, int],
    log_fp: tuple[int, int],
    engine_name: str,
) -> UnmatchedReport:
    return unmatched.unmatched(path, operator_id, batch, join_type=join_type, event_log=event_log)


def unmatched_cached(
    path: str, operator_id: int, batch: int, join_type: str | None = None, event_log: str | None = None
) -> UnmatchedReport:
    return _unmatched(
        path, operator_id, batch, join_type, event_log, fingerprint(path), log_fingerprint(event_log), engine.current()
    )


@st.cache_data(show_spinner=False, max_entries=32, ttl=30)
def _doctor(path: str, event_log: str | None, fp: tuple[int, int], log_fp: tuple[int, int]) -> DoctorReport:
    run = None
    if event_log:
        with contextlib.suppress(StateLensError):  # an event log that cannot be used is said above it, once
            run = progress_cached(path, event_log).run
    return checkpoint.doctor(path, run)


def doctor_cached(path: str, event_log: str | None = None) -> DoctorReport:
    """The checkpoint doctor (files only, no JVM), until the checkpoint commits again (and at most
    30 s: a batch in flight runs on)."""
    return _doctor(path, event_log, fingerprint(path), log_fingerprint(event_log))


@st.cache_data(show_spinner=False, max_entries=16)
def _checkup(path: str, event_log: str | None, fp: tuple[int, int], log_fp: tuple[int, int], engine_name: str) -> checkup.Checkup:
    return checkup.checkup(path, event_log=event_log)


def checkup_cached(path: str, event_log: str | None = None) -> checkup.Checkup:
    """The whole health check of a checkpoint, shared by every browser session until it commits again."""
    return _checkup(path, event_log, fingerprint(path), log_fingerprint(event_log), engine.current())


def log_fingerprint(event_log: str | None) -> tuple[int, int]:
    if event_log:
        check_allowed(event_log, "event log")  # as fingerprint: in the page's run, before any cached answer
    """Changes when an event log grows (a running application)."""
    return _log_fingerprint(event_log)


@st.cache_data(show_spinner=False, max_entries=16)
def _progress(path: str, event_log: str, fp: tuple[int, int], log_fp: tuple[int, int]) -> ProgressLog:
    return read_progress(event_log, _info(path, fp))


def progress_cached(path: str, event_log: str) -> ProgressLog:
    """The query's progress from its event log, until the checkpoint or the log changes."""
    return _progress(path, event_log, fingerprint(path), log_fingerprint(event_log))


def diagnosis_progress(path: str, event_log: str | None) -> ProgressLog | None:
    """The progress a diagnosis reads: the event log's plan (a join's type and condition, an
    aggregation's output mode) and progress (late rows), when one is given."""
    return progress_cached(path, event_log) if event_log else None


@st.cache_data(show_spinner=False, max_entries=32)
def _key_schemas(path: str, fp: tuple[int, int]) -> tuple[dict[int, list[dict[str, Any]]], dict[int, str]]:
    return checkpoint.read_key_fields(path)


def key_schemas_cached(path: str) -> tuple[dict[int, list[dict[str, Any]]], dict[int, str]]:
    """Each operator's key fields from the state schema files (no JVM), and why any could not be read."""
    return _key_schemas(path, fingerprint(path))


@st.cache_data(show_spinner=False, max_entries=16)
def _sources(path: str, fp: tuple[int, int]) -> dict[int, list[SourceBatch]]:
    return checkpoint.read_source_offsets(path)


def sources_cached(path: str) -> dict[int, list[SourceBatch]]:
    """What each batch read from each source, from offsets/ and sources/ (no JVM)."""
    return _sources(path, fingerprint(path))


@st.cache_data(show_spinner=False, max_entries=32)
def _skew(path: str, operator_id: int, store: str, batch: int, fp: tuple[int, int], engine_name: str) -> SkewReport:
    return checkup.skew(path, operator_id, store, batch)


def skew_cached(path: str, operator_id: int, store: str, batch: int) -> SkewReport:
    return _skew(path, operator_id, store, batch, fingerprint(path), engine.current())


@st.cache_data(show_spinner=False, max_entries=16)
def _repartition(path: str, partitions: int, fp: tuple[int, int]) -> RepartitionPreview:
    from spark_io.gather.repartition import repartition_preview

    return repartition_preview(path, partitions)


def repartition_cached(path: str, partitions: int) -> RepartitionPreview:
    """Where every stored key would go with ``partitions`` partitions (native, nothing written)."""
    return _repartition(path, partitions, fingerprint(path))


def escape_markdown(text: str) -> str:
    """Text shown as itself in st.markdown (a store name's ``_``, a key's ``*`` or ``$``)."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def chart(fig: Any, key: str) -> None:
    """A figure as its exports draw it (its own theme, not Streamlit's), its title above it as text
    that wraps on a narrow screen (a Plotly title is cut at the plot's edge). Plotly's own image
    button is left out: it would save the chart without that title, as plot-image.png; the page's
    PNG and SVG buttons (``chart_downloads``) save it titled and named."""
    shown = go.Figure(fig)
    title = shown.layout.title.text
    if title:
        st.markdown(f"**{escape_markdown(title)}**")
        top = shown.layout.margin.t
        shown.update_layout(title=None, margin_t=None if top is None else max(20, top - 30))
    config = {"modeBarButtonsToRemove": ["toImage"], "displaylogo": False}
    st.plotly_chart(shown, width="stretch", theme=None, key=key, config=config)


def audited(make: Callable[[], bytes], file: str) -> Callable[[], bytes]:
    """A download's data, made when clicked, and written in the audit log (on a shared server)."""
    note = auth.recorder(page=st.session_state.get("_page"), checkpoint=current_path())

    def data() -> bytes:
        out = make()
        note("download", file=file, bytes=len(out))
        return out

    return data


def chart_downloads(name: str, fig: Any, table: pa.Table | None, key: str) -> None:
    """PNG, SVG, HTML and CSV (with a table) of one chart, titled; images render only when clicked."""

    def render(fmt: str) -> Callable[[], bytes]:
        def make() -> bytes:
            try:
                return figure_bytes(fig, fmt)
            except StateLensError as e:  # no Chromium: the file says why instead of breaking the page
                return f"{e.title}: {e.message}".encode()

        return make

    # one row of buttons as wide as their labels (columns cut them to "P..." on narrow screens)
    row = st.container(horizontal=True, gap="small")
    for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml"), ("html", "text/html")):
        row.download_button(
            fmt.upper(), audited(render(fmt), f"{name}.{fmt}"), f"{name}.{fmt}", mime, key=f"{key}-{fmt}", on_click="ignore"
        )
    if table is not None:
        row.download_button(
            "CSV",
            audited(lambda: to_csv_bytes(table), f"{name}.csv"),
            f"{name}.csv",
            "text/csv",
            key=f"{key}-csv",
            on_click="ignore",
        )


def metric_row(items: list[tuple[str, Any, str | None]]) -> None:
    """Metrics side by side as wide as their values, wrapping onto a new line when the screen is
    narrow (equal columns cut long values to "c5c…")."""
    row = st.container(horizontal=True, gap="large", wrap=True)
    for label, value, help_text in items:
        row.metric(label, value, help=help_text, width="content")


def _cached_loader(
    info: CheckpointInfo, spec: TableSpec, batch: int, row_filter: RowFilter | None, limit: int | None, keys_only: bool
) -> tuple[pa.Table, str]:
    if spec.changes:
        table, start, end = read_changes_cached(info.path, spec.source, batch, row_filter, limit)
        return table, f"{start}–{end}"
    table, b = read_state_cached(info.path, spec.source, batch, row_filter, limit, keys_only)
    return table, str(b)


def workspace(
    path: str, batch: int | None, row_budget: int = DEFAULT_ROW_BUDGET, row_filter: RowFilter | None = None, spill: bool = False
) -> Workspace:
    """This browser session's DuckDB workspace for (checkpoint, batch, loading options);
    tables come from the shared cache."""
    key = (path, batch, row_budget, row_filter, spill, fingerprint(path))
    ws = st.session_state.get("_workspace")
    if ws is None or st.session_state.get("_workspace_key") != key:
        if ws is not None:
            ws.close()
        spill_dir = os.path.join(session.scratch_dir(), "spill") if spill else None
        ws = Workspace(path, batch, loader=_cached_loader, row_budget=row_budget, row_filter=row_filter, spill_dir=spill_dir)
        st.session_state["_workspace"] = ws
        st.session_state["_workspace_key"] = key
    return ws


def source_label(source: StateSource) -> str:
    if source.timers:
        return "registered timers (transformWithState)"
    if source.join_side:
        return f"join side: {source.join_side}"
    if source.state_var:
        return f"state variable: {source.state_var}"
    return f"store: {source.store_name}"


def controls() -> Any:
    """A row of selects, each as wide as its longest option, that wraps onto a new line on a narrow
    screen (columns of fixed shares cut "0: symmetricHashJoin" to "0: symmetricHashJoi")."""
    return st.container(horizontal=True, gap="medium", wrap=True)


def fitted_select(where: Any, label: str, options: list[Any], format_func: Callable[[Any], Any] = str, **kw: Any) -> Any:
    """``where.selectbox`` as wide as its label and its longest option (about 8.5 px a character
    at the app's font, plus the arrow, the padding and a help icon)."""
    longest = max([len(label) + (3 if kw.get("help") else 0), *(len(str(format_func(o))) for o in options)])
    return where.selectbox(label, options, format_func=format_func, width=max(110, min(560, int(longest * 8.5) + 60)), **kw)


def operator_label(info: CheckpointInfo, operator_id: int) -> str:
    op = info.operator(operator_id)
    if op is None:
        return str(operator_id)
    return f"{operator_id}: {op.operator_name}" + (" (inferred)" if op.inferred_from else "")


def spark_settings() -> None:
    """Sidebar: where Spark runs (local, a cluster master, or a Spark Connect server)."""
    current = session.target()
    with st.sidebar.expander(f"Spark: {current.describe()}"):
        kinds = ["Local", "Cluster master", "Spark Connect"]
        kind = st.radio("Run Spark", kinds, index=2 if current.remote else 1 if current.master else 0, key="spark_kind")
        url = ""
        if kind != "Local":
            url = st.text_input(
                "URL",
                value=current.remote or current.master or "",
                placeholder="sc://host:15002" if kind == "Spark Connect" else "spark://host:7077",
                key="spark_url",
            )
        st.caption("Applies to every user of this State Lens server.")
        if st.button("Apply", key="spark_apply"):
            with guard():
                if kind == "Spark Connect":
                    problem = session.connect_problem(url)
                    if problem:
                        raise SparkUnavailable(problem)
                session.configure(
                    master=url if kind == "Cluster master" else None, remote=url if kind == "Spark Connect" else None
                )
                st.rerun()


ENGINE_CHOICES = {
    "auto": "auto: the state files for local checkpoints, else Spark",
    "native": "native: the state files only (no JVM)",
    "spark": "Spark: the State Data Source",
}


def engine_settings() -> None:
    """Sidebar: who reads the state (``spark_io.readers.engine``); server-wide, like the Spark setting."""
    current = engine.current()
    with st.sidebar.expander(f"State reader: {current}"):
        st.radio(
            "Read state with",
            list(ENGINE_CHOICES),
            index=list(ENGINE_CHOICES).index(current),
            format_func=ENGINE_CHOICES.__getitem__,
            key="engine_choice",
            on_change=lambda: engine.configure(str(st.session_state["engine_choice"])),
        )
        st.caption(
            "Applies to every user of this State Lens server. Spark stays the engine of record: "
            "'Check with Spark' under an answer reads it again through Spark and compares."
        )


def engine_caption(used: str, note: str | None = None) -> None:
    """Says under an answer which engine read the state (and why Spark did, after a fallback)."""
    who = "the native reader (the state files, no JVM)" if used == engine.NATIVE else "Spark (the State Data Source)"
    why = f"; the native reader does not read {note}" if note else ""
    st.caption(f"State read by {who}{why}.")


def check_with_spark(used: str, run: Callable[[], tuple[bool, str]], key: str) -> None:
    """Under a native answer: a button that reads it again through Spark and says whether they agree."""
    if used != engine.NATIVE:
        return
    if st.button(
        "Check with Spark", key=f"check-{key}", help="Read the same again through Spark's State Data Source and compare."
    ):
        with guard():
            same, detail = with_progress("Reading the same with Spark", run, f"check-{key}")
            (st.success if same else st.error)(detail)


def with_progress(label: str, fn: Callable[[], T], key: str) -> T:
    """Run a Spark read with a live progress line and a Cancel button.

    Clicking Cancel reruns the page: the next progress update stops this script run, which
    interrupts the read's Spark jobs (``spark_io.runtime.jobs``); the rerun then says it was cancelled
    instead of starting the read again. Cached reads return at once without any of this.
    """
    flag = f"_cancelled:{key}"
    if st.session_state.pop(flag, False):
        st.info(f"{label}: cancelled.")
        st.button("Read again", key=f"again-{key}", type="primary")  # a click reruns the page, which reads again
        st.stop()
    status, button = st.empty(), st.empty()
    ctx = get_script_run_ctx()
    button.button("Cancel", key=f"cancel-{key}", on_click=lambda: st.session_state.update({flag: True}))

    def tick(p: jobs.Progress) -> None:
        status.caption(f":material/hourglass_top: {label} · {p.describe()}")

    try:
        return jobs.run_cancellable(fn, tick, prepare_thread=lambda t: add_script_run_ctx(t, ctx))
    finally:
        status.empty()
        button.empty()


def warm_up_in_background() -> None:
    """Warm up what will read the state while the user looks at the overview: Spark when it reads
    the state (``--engine spark`` or a cluster), else the native reader's compiled loops (with the
    native reader a JVM would only take the CPU the first answers need; the first read that needs
    Spark starts it)."""
    if engine.current() == engine.SPARK or engine.spark_chosen_on_purpose():
        _start_spark_once()
    else:
        _warm_native_once()


@st.cache_resource(show_spinner=False)
def _start_spark_once() -> bool:
    session.start_in_background()
    return True


@st.cache_resource(show_spinner=False)
def _warm_native_once() -> bool:
    engine.warm_native_in_background()
    return True


def grid_height(rows: int, most: int = 520) -> int:
    """A grid as tall as its rows (a header and 35 px a row), up to ``most``: no padding of empty rows."""
    return min(most, 38 + 35 * max(rows, 1))
