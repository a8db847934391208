"""What every page shares: the chosen checkpoint, its one kept object, cached answers, and the one
error renderer.

Pages stay thin: widgets -> a question to the checkpoint's ``statelens.Checkpoint`` (one object per
checkpoint and committed batch, kept for every session, as datasette hands one object to every view)
-> a chart from ``analysis.charts`` -> render. The caches here are thin ``st.cache_*`` wrappers
around its methods. Errors from any of those are ``StateLensError``s and are shown here, by
``guard()``, as one ``st.error`` with a title and a message.
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
from typing import Any, TypeVar, cast

import plotly.graph_objects as go
import pyarrow as pa
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

import statelens
from statelens import server
from statelens.analysis.charts.export import figure_bytes, to_csv_bytes
from statelens.text import human_bytes
from statelens.views import auth

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


Reader = tuple[str, tuple[str, ...] | None]


def reader() -> Reader:
    """Who reads: the engine, and the bounds every read is checked against (the signed-in user's
    roots). A kept checkpoint and the answers cached here are shared only by sessions with the same
    bounds: what was read within one user's roots (a link followed there) is never served to another."""
    return server.current_engine(), server.bound_roots()


@st.cache_data(show_spinner="Listing checkpoints…", ttl=30, max_entries=16)
def _checkpoints_under(prefix: str, who: Reader) -> Any:
    return statelens.ls(prefix)


def checkpoints_under(prefix: str) -> Any:
    """Every checkpoint under a folder or prefix (``statelens.ls``: its rows, and the links it skipped),
    kept 30 s for sessions with the same bounds (the user's bounds checked first, every run)."""
    auth.typed("prefix", prefix)
    server.check_allowed(prefix, "folder")
    return _checkpoints_under(prefix, reader())


def sample_pipeline() -> str:
    """The bundled Declarative Pipeline's storage root ('' when not bundled or not allowed); its tables
    and inputs are beside it (``sample_data_root``, ``sample_pipeline_inputs``)."""
    storage = SAMPLES_DIR / "sdp" / "orders" / "storage"
    return str(storage) if storage.is_dir() and auth.may(str(storage)) else ""


def sample_data_root(root: str) -> str:
    """Where the bundled pipeline's tables are, given its storage root, else ''."""
    return _beside_pipeline(root, "warehouse")


def sample_pipeline_inputs(root: str) -> str:
    """Where the bundled pipeline's input files are now (its logs name the folder it ran in), given
    its storage root, else ''."""
    return _beside_pipeline(root, "inputs")


def _beside_pipeline(root: str, folder: str) -> str:
    storage = sample_pipeline()
    found = Path(storage).parent / folder
    return str(found) if storage and root.rstrip("/") == storage and found.is_dir() and auth.may(str(found)) else ""


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
    except statelens.StateLensError as e:
        if e.refusal:  # not allowed: in the run's audit line
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
        with statelens.question(), statelens.downloads(show), statelens.speaking_as("cli"):  # the app names flags as the CLI
            yield
    finally:
        bar.empty()


def requested_page() -> str:
    """The page the browser's address asked for (its URL path; '' for the app's root), before
    navigation fell back to the overview for a page it does not offer."""
    ctx = get_script_run_ctx()
    return (ctx.pages_manager.intended_page_name or "") if ctx is not None else ""


def fingerprint(path: str) -> tuple[int, int]:
    """Changes when the checkpoint commits a new batch: the key for cached reads. Every cached read
    of a checkpoint asks it first, in the page's run: the signed-in user's bounds are checked here,
    before a cached answer another user asked for could be served."""
    server.check_allowed(path)
    return server.fingerprint(path)


def log_fingerprint(event_log: str | None) -> tuple[int, int]:
    """Changes when an event log grows (a running application); the user's bounds checked first, as
    ``fingerprint``'s."""
    if event_log:
        server.check_allowed(event_log, "event log")
    return server.log_fingerprint(event_log)


@st.cache_resource(show_spinner=False, max_entries=6)
def _opened(path: str, fp: tuple[int, int], who: Reader) -> statelens.Checkpoint:
    """The checkpoint at one committed batch, read by one engine within one set of bounds: what it reads
    is kept for those sessions' questions until it commits again."""
    return statelens.Checkpoint(path, keep=True)


def opened(path: str) -> statelens.Checkpoint:
    """The checkpoint's kept object (its reads shared by the sessions with the same bounds; never copied)."""
    return _opened(path, fingerprint(path), reader())


@st.cache_data(show_spinner=False, max_entries=128)
def _asked(path: str, fp: tuple[int, int], who: Reader, log_fp: tuple[int, int], method: str, args: tuple[Any, ...]) -> Any:
    return getattr(_opened(path, fp, who), method)(*args)


@st.cache_data(show_spinner=False, max_entries=32, ttl=30)
def _asked_fresh(path: str, fp: tuple[int, int], who: Reader, log_fp: tuple[int, int], method: str, args: tuple[Any, ...]) -> Any:
    return getattr(_opened(path, fp, who), method)(*args)


class _Cached:
    """A checkpoint's methods through the page cache (see ``cached``)."""

    def __init__(self, path: str, event_log: str | None, fresh: bool) -> None:
        self._path, self._event_log, self._fresh = path, event_log, fresh

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if not callable(getattr(statelens.Checkpoint, method, None)):
            raise AttributeError(f"statelens.Checkpoint has no method {method!r}")

        def call(*args: Any) -> Any:
            fp, log_fp = fingerprint(self._path), log_fingerprint(self._event_log)
            return (_asked_fresh if self._fresh else _asked)(self._path, fp, reader(), log_fp, method, args)

        return call


def cached(path: str, event_log: str | None = None, fresh: bool = False) -> statelens.Checkpoint:
    """The checkpoint's questions as ``statelens.Checkpoint``'s methods (typed: ``cached(path).skew(0)``),
    each answer given to each session as its own copy until the checkpoint commits again (or
    ``event_log`` grows); ``fresh``: and at most 30 s (a batch in flight runs on)."""
    return cast(statelens.Checkpoint, _Cached(path, event_log, fresh))


@st.cache_data(show_spinner=False, ttl=30, max_entries=32)
def _across(question: str, root: str, data_root: str | None, who: Reader, args: tuple[Any, ...], kw: tuple[Any, ...]) -> Any:
    return getattr(statelens, question)(root, *args, data_root=data_root, **dict(kw))


def _checked(root: str, data_root: str | None, *others: tuple[str, str | None]) -> None:
    """The paths of a question about a root, said in the run's audit line and checked against the user's bounds."""
    for what, path in (("root", root), ("data root", data_root), *others):
        if path:
            auth.typed(what, path)
            server.check_allowed(path, "folder" if what != "event log" else what)


def pipeline_cached(root: str, data_root: str | None = None, event_log: str | None = None) -> Any:
    """The queries under ``root`` and the hops between them (``statelens.open_pipeline``). Each question
    about a root is kept 30 s for sessions with the same bounds (the user's bounds checked first, every run)."""
    _checked(root, data_root, ("event log", event_log))
    return _across("open_pipeline", root, data_root, reader(), (), (("event_log", event_log),))


def why_missing_across_cached(
    root: str, keys: tuple[str, ...], key_field: str | None, event_log: str | None, data_root: str | None, input_root: str | None
) -> Any:
    """Each key followed through every query under ``root`` (``statelens.why_missing_across``)."""
    _checked(root, data_root, ("event log", event_log), ("input", input_root))
    kw = (("key_field", key_field), ("event_log", event_log), ("input_root", input_root))
    return _across("why_missing_across", root, data_root, reader(), keys, kw)


def sql_across_cached(root: str, query: str, data_root: str | None, max_rows: int) -> Any:
    """DuckDB SQL over the state of every query under ``root`` (``statelens.sql_across``)."""
    _checked(root, data_root)
    return _across("sql_across", root, data_root, reader(), (query,), (("max_rows", max_rows),))


def pipeline_root() -> str | None:
    """The sidebar's path when it is no checkpoint but holds some (a pipeline's root), else None (a path
    that is not usable is said by the checkpoint's own pages)."""
    path = current_path()
    if not path:
        return None
    try:
        if server.is_local(path):
            statelens.open(path)
        else:
            cached(path).info()  # what the checkpoint's pages ask first, kept
    except statelens.NotACheckpoint:
        try:
            pipeline_cached(path)  # kept: the page asks it next
        except statelens.NotACheckpoint:
            return None  # no checkpoint under it either: the checkpoint's message says what to give
        except statelens.StateLensError:
            return path  # a root whose pipeline cannot be read: its page says why, asking again
        return path
    except statelens.StateLensError:
        return None  # a checkpoint that cannot be read: its own pages say why
    return None


def checkpoint_info() -> Any:
    """The chosen checkpoint's log facts (``CheckpointInfo``, no JVM); shows the error and returns None
    if unusable."""
    path = current_path()
    if not path:
        st.info("Choose a checkpoint in the sidebar: type its path or pick a bundled sample.")
        return None
    with guard():
        if server.is_local(path):
            statelens.open(path)  # fail fast, and never cache a bad path
        return cached(path).info()
    return None


def why_missing_cached(path: str, q: statelens.KeyQuestion) -> statelens.Answers:
    """Why-missing's answers to ``q``: the whole query (``statelens.QueryAnswers``: each key's records
    from the input files to the output), or one operator's verdicts (``q.near_misses=False``: without
    the look-alike search)."""
    for moved, what in (*((r, "input") for r in q.input_roots), (q.sink, "sink")):
        if moved:
            auth.typed(what, moved)  # checked where it is read (a cached answer was asked with the same bounds)
    return cached(path, q.event_log).ask(q)


def doctor_cached(path: str, event_log: str | None = None) -> Any:
    """The checkpoint doctor (files only, no JVM); with the event log, whether the query still runs
    (an event log that cannot be used is said above it, once)."""
    if event_log:
        with contextlib.suppress(statelens.StateLensError):
            return cached(path, event_log, fresh=True).doctor(event_log).report
    return cached(path, fresh=True).doctor().report


def progress_cached(path: str, event_log: str | None) -> Any:
    """Per batch what each source read (``statelens.results.Progress``), and with the event log its
    rows, durations and late rows (``.log``)."""
    return cached(path, event_log).progress(event_log)


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
    """A download's data, made when clicked: on a shared server written in the audit log and served
    only to the user who asked for it."""
    return auth.download(make, file, page=st.session_state.get("_page"), checkpoint=current_path())


def chart_downloads(name: str, fig: Any, table: pa.Table | None, key: str) -> None:
    """PNG, SVG, HTML and CSV (with a table) of one chart, titled; images render only when clicked."""

    def render(fmt: str) -> Callable[[], bytes]:
        def make() -> bytes:
            try:
                return figure_bytes(fig, fmt)
            except statelens.StateLensError as e:  # no Chromium: the file says why instead of breaking the page
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


def workspace(
    path: str, batch: int | None, row_budget: int | None = None, partitions: tuple[int, ...] = (), spill: bool = False
) -> Any:
    """This browser session's DuckDB workspace for (checkpoint, batch, loading options); its tables
    are read once by the checkpoint's kept object for every session with the same bounds."""
    key = (path, batch, row_budget, partitions, spill, fingerprint(path), auth.session_scratch())
    ws = st.session_state.get("_workspace")
    if ws is None or st.session_state.get("_workspace_key") != key:
        if ws is not None:
            ws.close()
        ws = opened(path).new_workspace(batch, row_budget, partitions, spill)
        st.session_state["_workspace"] = ws
        st.session_state["_workspace_key"] = key
    return ws


def source_label(source: Any) -> str:
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


def operator_label(info: Any, operator_id: int) -> str:
    op = info.operator(operator_id)
    if op is None:
        return str(operator_id)
    return f"{operator_id}: {op.operator_name}" + (" (inferred)" if op.inferred_from else "")


def spark_settings() -> None:
    """Sidebar: where Spark runs (local, a cluster master, or a Spark Connect server)."""
    current = server.target()
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
                    problem = server.connect_problem(url)
                    if problem:
                        raise server.SparkUnavailable(problem)
                server.configure_spark(
                    master=url if kind == "Cluster master" else None, remote=url if kind == "Spark Connect" else None
                )
                st.rerun()


ENGINE_CHOICES = {
    "auto": "auto: the state files for local checkpoints, else Spark",
    "native": "native: the state files only (no JVM)",
    "spark": "Spark: the State Data Source",
}


def engine_settings() -> None:
    """Sidebar: who reads the state; server-wide, like the Spark setting."""
    current = server.current_engine()
    with st.sidebar.expander(f"State reader: {current}"):
        st.radio(
            "Read state with",
            list(ENGINE_CHOICES),
            index=list(ENGINE_CHOICES).index(current),
            format_func=ENGINE_CHOICES.__getitem__,
            key="engine_choice",
            on_change=lambda: server.configure_engine(str(st.session_state["engine_choice"])),
        )
        st.caption(
            "Applies to every user of this State Lens server. Spark stays the engine of record: "
            "'Check with Spark' under an answer reads it again through Spark and compares."
        )


def engine_caption(used: str, note: str | None = None) -> None:
    """Says under an answer which engine read the state (and why Spark did, after a fallback)."""
    who = "the native reader (the state files, no JVM)" if used == server.NATIVE else "Spark (the State Data Source)"
    why = f"; the native reader does not read {note}" if note else ""
    st.caption(f"State read by {who}{why}.")


def check_with_spark(used: str, run: Callable[[], tuple[bool, str]], key: str) -> None:
    """Under a native answer: a button that reads it again through Spark and says whether they agree."""
    if used != server.NATIVE:
        return
    if st.button(
        "Check with Spark", key=f"check-{key}", help="Read the same again through Spark's State Data Source and compare."
    ):
        with guard():
            same, detail = with_progress("Reading the same with Spark", run, f"check-{key}")
            (st.success if same else st.error)(detail)


CANCELLED = "_cancelled:"  # + a read's key: its Cancel was clicked (the value: the read's label)


def with_progress(label: str, fn: Callable[[], T], key: str) -> T:
    """Run a Spark read with a live progress line and a Cancel button.

    Clicking Cancel reruns the page: the next progress update stops this script run, which
    interrupts the read's Spark jobs; the rerun then says it was cancelled
    instead of starting the read again. Cached reads return at once without any of this.
    """
    flag = f"{CANCELLED}{key}"
    if st.session_state.pop(flag, None):
        st.info(f"{label}: cancelled.")
        st.button("Read again", key=f"again-{key}", type="primary")  # a click reruns the page, which reads again
        st.stop()
    status, button = st.empty(), st.empty()
    ctx = get_script_run_ctx()
    button.button("Cancel", key=f"cancel-{key}", on_click=lambda: st.session_state.update({flag: label}))

    def tick(p: server.Progress) -> None:
        status.caption(f":material/hourglass_top: {label} · {p.describe()}")

    try:
        return server.run_cancellable(fn, tick, prepare_thread=lambda t: add_script_run_ctx(t, ctx))
    finally:
        status.empty()
        button.empty()


def cancels_seen() -> None:
    """At the end of a run: a Cancel whose page did not ask for its read again (the SQL page reruns
    without running its query) is said once, in a toast, and forgotten: the next Run runs."""
    for flag in [k for k in st.session_state if str(k).startswith(CANCELLED)]:
        st.toast(f"{st.session_state.pop(flag)}: cancelled.", icon=":material/cancel:")


def warm_up_in_background() -> None:
    """Warm up what will read the state while the user looks at the overview (``statelens.server.warm_up``),
    once per choice of engine."""
    _warm_once(server.current_engine() == server.SPARK or server.spark_chosen_on_purpose())


@st.cache_resource(show_spinner=False)
def _warm_once(spark: bool) -> bool:
    server.warm_up()
    return True


def grid_height(rows: int, most: int = 520) -> int:
    """A grid as tall as its rows (a header and 35 px a row), up to ``most``: no padding of empty rows."""
    return min(most, 38 + 35 * max(rows, 1))
