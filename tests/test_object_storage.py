"""Checkpoints on S3, ADLS and GCS, read natively: real protocol servers on loopback (moto's S3
server, Azurite, gcp-storage-emulator, ``object_stores.py``), every bundled sample uploaded to each.

Every command's answer over the URI equals its answer on the local folder; reads make the
requests a careful engineer would (counted by a proxy in front of each server); nothing is
written; bad credentials, a missing bucket and a server that stops give one clear line."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import object_stores as stores
import pytest

from support import ROOT, SAMPLE_NAMES, SAMPLES

pytestmark = [
    pytest.mark.emulator,
    pytest.mark.skipif(not stores.AZURITE_BIN.exists(), reason="azurite is installed by scripts/test.sh"),
]

# every sample on S3: overview and doctor; every command on a RocksDB and an HDFS
# join, transformWithState, a file sink's aggregation and a windowed aggregation (with event logs),
# on every cloud (the emulators of Azure and GCS take minutes to hold every sample)
DEEP = ("join_hdfs", "join_rocksdb", "transform_with_state", "file_sink_agg", "windowed_agg")


def on(cloud: str) -> tuple[str, ...]:
    return tuple(SAMPLE_NAMES) if cloud == "s3" else DEEP


CLOUDS = ("s3", "azure", "gcs")


@pytest.fixture(scope="module")
def local_copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each sample as it is on object storage (no Hadoop .crc files): the local side of each comparison."""
    tmp = tmp_path_factory.mktemp("as-uploaded")
    return {n: str(stores.without_local_checksums(SAMPLES / n, tmp / n)) for n in SAMPLE_NAMES}


@pytest.fixture(scope="module")
def servers(local_copies: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, stores.Server]]:
    tmp = tmp_path_factory.mktemp("object-stores")
    started: dict[str, stores.Server] = {}
    try:
        for name in CLOUDS:
            started[name] = stores.STARTERS[name](tmp)
        for server in started.values():
            for n in on(server.name):
                stores.upload(server, Path(local_copies[n]), f"checkpoints/{n}")
            for n in ("join_rocksdb", "windowed_agg"):
                stores.upload(server, SAMPLES / "event_logs" / n, f"event_logs/{n}")
        yield started
    finally:
        for server in started.values():
            server.stop()


@contextlib.contextmanager
def using(server: stores.Server, cache: Path | None = None, **extra: str) -> Iterator[None]:
    """The server's endpoint and credentials in the environment, as a user sets them, and a fresh
    cache folder (unless given)."""
    from statelens.spark_io.storage.cloud import forget_filesystems

    keys = set(server.env) | set(extra) | {"STATELENS_CACHE_DIR"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(server.env)
    os.environ.update(extra)
    os.environ["STATELENS_CACHE_DIR"] = str(cache or Path(os.environ.get("PYTEST_TMP", "/tmp")) / f"cache-{time.time_ns()}")
    forget_filesystems()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        forget_filesystems()


def cli(*args: str) -> tuple[int, str, str]:
    """The CLI in this process (the same code path as a process, without its start-up)."""
    import statelens.cli as cli_module

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_module.main(list(args))
    return code, out.getvalue(), err.getvalue()


def _key_of(path: str) -> list[str]:
    """A key the query really had (the first row of its first store's newest state) and one never seen."""
    from statelens.analysis.core.model import sources_of
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers.native.reader import NativeReader

    info = read_checkpoint(path)
    if not info.operators or not info.committed_batches:
        return ["never-seen-key"]
    src = sources_of(info.operators[0])[0]
    keys = NativeReader(info).state(src, info.committed_batches[-1].batch_id).column("key").to_pylist()

    def scalar(v: Any) -> str | None:
        if isinstance(v, dict):
            return next((s for x in v.values() if (s := scalar(x)) is not None), None)
        return None if v is None else str(v)

    found = next((s for k in keys if (s := scalar(k)) is not None), None)
    return [found, "never-seen-key"] if found else ["never-seen-key"]


def commands(cp: str, event_log: str | None, every: bool) -> list[list[str]]:
    from statelens.analysis.core.model import sources_of, table_name
    from statelens.spark_io.logs.checkpoint import read_checkpoint

    info = read_checkpoint(cp)
    table = table_name(sources_of(info.operators[0])[0]) if info.operators else "op0"
    out = [["overview", cp, "--json"], ["doctor", cp, "--json"]]
    if not every:
        return out
    out += [
        ["why-missing", cp, *_key_of(cp), "--json"],
        ["skew", cp, "--json"],
        ["growth", cp, "--json"],
        ["sql", cp, f"SELECT count(*) AS n FROM {table}", "--json"],
        ["unmatched", cp, "--json"],
    ]
    if event_log:
        out.append(["progress", cp, "--event-log", event_log, "--json"])
        out.append(["why-missing", cp, *_key_of(cp), "--event-log", event_log, "--json"])
    return out


def _report(cp: str, out: Path, where: dict[str, str]) -> str:
    """The one-file health report's HTML, with chart element ids (random per write), the time it
    was written and the remote locations written as local ones."""
    code, _, err = cli("report", cp, "--out", str(out))
    assert code == 0, err
    html = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "id", out.read_text())
    html = re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated (when)", html)
    for uri, path in where.items():
        html = html.replace(uri, path)
    return html


def _same(local: tuple[int, str, str], remote: tuple[int, str, str], where: dict[str, str], label: str) -> None:
    """Equal answers, once each remote location is written as its local one."""
    code, out, err = remote
    for uri, path in where.items():
        out, err = out.replace(uri, path), err.replace(uri, path)
    assert (code, err) == (local[0], local[2]), label
    if local[1].lstrip().startswith(("{", "[")):
        assert json.loads(out) == json.loads(local[1]), label
    else:
        assert out == local[1], label


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_command_over_the_uri_answers_as_on_the_local_folder(
    cloud: str, servers: dict[str, stores.Server], local_copies: dict[str, str], tmp_path: Path
) -> None:
    server = servers[cloud]
    with using(server):
        for name in on(cloud):
            uri = stores.uri_of(cloud, f"checkpoints/{name}")
            has_log = name in ("join_rocksdb", "windowed_agg")
            local_log = str(SAMPLES / "event_logs" / name) if has_log else None
            remote_log = stores.uri_of(cloud, f"event_logs/{name}") if has_log else None
            local = local_copies[name]
            every = name in DEEP
            pairs = zip(commands(local, local_log, every), commands(uri, remote_log, every), strict=True)
            for local_args, remote_args in pairs:
                where = {uri: local, **({remote_log: local_log} if remote_log and local_log else {})}
                _same(cli(*local_args), cli(*remote_args), where, f"{cloud} {name} {local_args[0]}")
            if every:
                remote_html = _report(uri, tmp_path / f"{name}-remote.html", {uri: local})
                assert remote_html == _report(local, tmp_path / f"{name}-local.html", {}), f"{cloud} {name} report"
        assert server.proxy.methods().keys() <= {"GET", "HEAD"}, server.proxy.methods()  # read-only


def test_a_cli_process_answers_over_s3_without_java(servers: dict[str, stores.Server], tmp_path: Path) -> None:
    """A whole CLI process with no Java on the machine answers from S3 (natively: no JVM started)."""
    server = servers["s3"]
    uri = stores.uri_of("s3", "checkpoints/join_rocksdb")
    env = {**os.environ, **server.env, "STATELENS_CACHE_DIR": str(tmp_path / "cache"), "JAVA_HOME": "/nonexistent"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "java").exists())
    for args in (
        ["overview", uri, "--json"],
        ["why-missing", uri, "ord-155", "--json"],
        ["sql", uri, "SELECT count(*) FROM op0_left"],
    ):
        r = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0 and not r.stderr, (args, r.stderr[-2000:])
        assert r.stdout.strip()


def _state_gets(requests: list[tuple[str, str]]) -> list[str]:
    return [p for m, p in requests if m == "GET" and re.search(r"\.(delta|snapshot|changelog|zip|sst)(\?|$)", p)]


def test_a_second_question_downloads_no_state_file(servers: dict[str, stores.Server], tmp_path: Path) -> None:
    """State files are kept in the local cache: asking again fetches only listings and log files."""
    server = servers["s3"]
    uri = stores.uri_of("s3", "checkpoints/join_rocksdb")
    with using(server, cache=tmp_path / "cache"):
        with server.proxy.counting() as first:
            one = cli("why-missing", uri, "ord-155", "--operator", "0", "--json")
        with server.proxy.counting() as second:
            two = cli("why-missing", uri, "ord-155", "--operator", "0", "--json")
    assert one == two and one[0] == 0
    assert len(_state_gets(first)) > 20 and _state_gets(second) == []
    assert len(second) < len(first) / 5, (len(first), len(second))
    assert any(p.name.startswith(("0", "1", "2")) for p in (tmp_path / "cache" / "files").iterdir())


def test_a_key_lookup_lists_each_folder_once_and_fetches_only_the_keys_partition(
    servers: dict[str, stores.Server],
) -> None:
    """why-missing of a key in state on an 8-partition join: the state files fetched are those of
    the key's partition (Spark's hash of the key, as the native reader computes it), each folder
    listed once."""
    from statelens.analysis.core.model import sources_of
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers.native.reader import NativeReader

    server = servers["s3"]
    uri = stores.uri_of("s3", "checkpoints/hot_key_join")
    with using(server):
        info = read_checkpoint(uri)
        assert {s.num_partitions for s in info.operators[0].stores} == {8}
        reader, batch = NativeReader(info), info.committed_batches[-1].batch_id
        sides = [s for s in sources_of(info.operators[0]) if s.join_side]
        left, right = ({k["field0"] for k in reader.state(s, batch).column("key").to_pylist()} for s in sides)
        key = min((left & right) - {"hot"})  # on both sides: no near-miss search (that reads the other partitions)
    with using(server), server.proxy.counting() as got:  # a fresh cache
        code, out, err = cli("why-missing", uri, key, "--json")
    local = json.loads(cli("why-missing", str(SAMPLES / "hot_key_join"), key, "--json")[1])
    assert code == 0 and json.loads(out)["results"] == local["results"], err
    assert local["results"][0]["evidence"]  # the key is in state: found in its partition
    partitions = {m.group(1) for p in _state_gets(got) if (m := re.search(r"/state/\d+/(\d+)/", p))}
    assert len(partitions) == 1 and len(_state_gets(got)) > 0, (key, [p for p in _state_gets(got) if "/0/0/" not in p])
    listings = [p for m, p in got if m == "GET" and "list-type=2" in p]
    assert listings and len(listings) == len(set(listings)), sorted(listings)


def test_outside_the_allowed_roots_no_request_is_made(servers: dict[str, stores.Server]) -> None:
    server = servers["s3"]
    uri = stores.uri_of("s3", "checkpoints/join_rocksdb")
    with using(server, STATELENS_ALLOWED_ROOTS=f"s3a://{stores.BUCKET}/elsewhere"), server.proxy.counting() as got:
        code, _, err = cli("overview", uri)
        allowed = cli("overview", f"s3a://{stores.BUCKET}/elsewhere/../checkpoints/join_rocksdb")
    assert code == 2 and "outside the folders this State Lens may open" in err and err.count("\n") == 1
    assert allowed[0] == 2 and got == []
    with using(server, STATELENS_ALLOWED_ROOTS=f"s3a://{stores.BUCKET}/checkpoints/"):  # s3a:// and s3:// are one place
        assert cli("overview", uri)[0] == 0


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_missing_bucket_is_one_clear_line(cloud: str, servers: dict[str, stores.Server]) -> None:
    uri = stores.uri_of(cloud, "checkpoints/join_rocksdb").replace(stores.BUCKET, "no-such-bucket")
    with using(servers[cloud]):
        code, out, err = cli("overview", uri)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert uri in err and ("does not exist" in err), err


def test_refused_credentials_are_one_clear_line(servers: dict[str, stores.Server]) -> None:
    """Azurite checks each request's signature: a wrong account key is refused (HTTP 403)."""
    server = servers["azure"]
    uri = stores.uri_of("azure", "checkpoints/join_rocksdb")
    wrong = server.env["AZURE_STORAGE_CONNECTION_STRING"].replace(stores.AZURITE_KEY, "d3Jvbmcta2V5" * 8)
    with using(server, AZURE_STORAGE_CONNECTION_STRING=wrong):
        code, out, err = cli("overview", uri)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "Azure refused the request" in err and "AZURE_STORAGE_CONNECTION_STRING" in err, err


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_server_that_stops_mid_read_is_one_clear_line_in_seconds(
    cloud: str, servers: dict[str, stores.Server], tmp_path: Path
) -> None:
    """The logs are read, then the server stops answering before the state files: one line, no hang."""
    server = servers[cloud]
    uri = stores.uri_of(cloud, "checkpoints/join_hdfs")
    with using(server, cache=tmp_path / "cache"):
        assert cli("overview", uri)[0] == 0
        server.proxy.fail = True
        try:
            start = time.monotonic()
            code, out, err = cli("sql", uri, "SELECT count(*) FROM op0_left")
            took = time.monotonic() - start
        finally:
            server.proxy.fail = False
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert uri.split("/checkpoints")[0] in err and "did not answer" in err, err
    assert took < 60, took


def _rows(ls_json: str) -> list[dict[str, object]]:
    """ls --json's rows without the watermark's lag (measured against the clock)."""
    rows = json.loads(ls_json)["checkpoints"]
    for r in rows:
        r.pop("watermark_lag_ms")
    return cast(list[dict[str, object]], rows)


def test_ls_of_a_bucket_prefix_gives_the_rows_of_the_local_folder_without_reading_state(
    servers: dict[str, stores.Server], local_copies: dict[str, str], tmp_path: Path
) -> None:
    """ls reads listings and log files, never state; the next ls lists the folders again (a query
    adds batches) and fetches no file (the committed batches' logs are kept)."""
    server = servers["s3"]
    prefix = stores.uri_of("s3", "checkpoints")
    local_root = str(Path(local_copies[SAMPLE_NAMES[0]]).parent)
    with using(server, cache=tmp_path / "cache"):
        with server.proxy.counting() as got:
            code, out, err = cli("ls", prefix, "--json", "--sort", "path")
        with server.proxy.counting() as again:
            out_again = cli("ls", prefix, "--json", "--sort", "path")[1]
    assert code == 0 and not err, err
    assert _rows(out_again) == _rows(out)
    listings = [p for m, p in again if m == "GET" and "list-type=2" in p]
    assert listings == [p for m, p in again] and len(listings) == len(set(listings)), again
    assert sum(p.endswith("%2Foffsets%2F") for p in listings) == len(SAMPLE_NAMES), listings  # re-listed: a query adds batches
    local, remote = _rows(cli("ls", local_root, "--json", "--sort", "path")[1]), _rows(out.replace(prefix, local_root))
    assert remote == local and len(remote) == len(SAMPLE_NAMES)
    assert _state_gets(got) == [] and {m for m, _ in got} <= {"GET", "HEAD"}


def test_the_app_opens_an_s3_uri_as_it_opens_the_local_folder(
    servers: dict[str, stores.Server], local_copies: dict[str, str]
) -> None:
    """The sidebar takes ``s3://…`` like a path: the overview's figures and why-missing's verdicts
    are those of the local folder."""
    from streamlit.testing.v1 import AppTest

    def opened(cp: str) -> tuple[dict[str, str], list[str]]:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.session_state["checkpoint"] = cp
        at.run()
        assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
        figures = {m.label: m.value for m in at.metric}
        at.switch_page("views/why_missing.py").run()
        at.selectbox(key="wm_op").set_value(0).run()
        at.text_area(key="wm_keys").set_value("ord-155\nord-1000").run()
        at.button(key="wm_run").click().run()
        assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
        return figures, [m.value for m in at.markdown if m.value.startswith("####")]

    with using(servers["s3"]):
        remote = opened(stores.uri_of("s3", "checkpoints/join_rocksdb"))
    local = opened(local_copies["join_rocksdb"])
    assert remote == local and len(local[1]) == 2 and local[0]["Batches"] != "0"


def test_a_download_bar_drawn_inside_a_cached_read_is_not_replayed(
    servers: dict[str, stores.Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Downloads show a bar once they take a while (here: at once), also while a cached function
    reads; the page's next run answers from that cache without replaying the bar (a block of an
    earlier run: Streamlit would fail the cached function)."""
    from streamlit.testing.v1 import AppTest

    from statelens.spark_io.storage import downloads

    monkeypatch.setattr(downloads, "SHOW_AFTER_S", 0.0)
    with using(servers["s3"]):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.session_state["checkpoint"] = stores.uri_of("s3", "checkpoints/join_hdfs")
        at.run()
        first = {m.label: m.value for m in at.metric}
        at.run()  # the checkpoint's facts from the cache
        assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
        assert {m.label: m.value for m in at.metric} == first and first["Batches"] != "0"


def test_a_cache_folder_that_cannot_be_written_is_said_not_blamed_on_the_checkpoint(
    servers: dict[str, stores.Server], local_copies: dict[str, str], tmp_path: Path
) -> None:
    """Log files are read without their local copy (the overview answers as on the local folder);
    state files are read from a local copy, so a question that needs them names the cache folder
    and what to set, in one line."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "files").write_text("a file where the cache's folder goes")
    uri = stores.uri_of("s3", "checkpoints/join_hdfs")
    with using(servers["s3"], cache=cache):
        overview = cli("overview", uri, "--json")
        code, out, err = cli("why-missing", uri, "ord-155", "--operator", "0", "--json")
    local = cli("overview", local_copies["join_hdfs"], "--json")
    _same(local, overview, {uri: local_copies["join_hdfs"]}, "overview")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "could not be written" in err and "STATELENS_CACHE_DIR" in err and "Corrupt" not in err, err
