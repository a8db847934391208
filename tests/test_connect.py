"""Through a real Spark Connect server (started from the pinned pyspark's sbin/ on a free loopback
port): overview, the state browser's read, SQL, why-missing, skew, and the log reader for URIs
(Spark's binaryFile reader) give the same answers as local Spark. The Connect side runs in its own
process, as a user's would (SPARK_REMOTE or --remote)."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from support import ROOT, sample

pytestmark = pytest.mark.jvm  # a Spark Connect server

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from statelens.spark_io.runtime import session
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.state_reader import StateSource, read_state
from statelens.spark_io.gather.workspace import Workspace
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.gather.checkup import skew
cp = sys.argv[2]
out = {"remote": session.target().remote}
info = read_checkpoint(cp)
out["batches"] = [[b.batch_id, b.watermark_ms] for b in info.batches]
left, batch = read_state(cp, StateSource(0, join_side="left"), 10)
out["left_at_10"] = sorted(r["key"]["field0"] for r in left.to_pylist())
out["sql"] = Workspace(cp).execute("SELECT value.matched AS m, count(*) AS n FROM op0_left_keyWithIndexToValue GROUP BY ALL ORDER BY 1").table.to_pylist()
out["why"] = [[r.key, r.verdict, r.side, r.evicted_at_batch, r.was_matched] for r in why_missing(cp, KeyQuestion(("ord-150", "ord-154", "ord-156", "ord-6", "ord-1000"))).results]
out["skew"] = skew(cp).rows_by_partition
import os
from statelens.spark_io.logs.checkpoint import list_state_files
os.environ["STATELENS_LOGS_VIA_SPARK"] = "1"  # the log facts through Spark's binaryFile reader
via = read_checkpoint("file://" + cp)
out["batches_via_spark"] = [[b.batch_id, b.watermark_ms, b.committed] for b in via.batches]
out["files_via_spark"] = sorted((f.path, f.size) for f in list_state_files("file://" + cp))
print("@@" + json.dumps(out, default=str))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("connect")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(work),
        "SPARK_PID_DIR": str(work),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    port = free_port()
    subprocess.run(
        [
            "bash",
            str(home / "sbin" / "start-connect-server.sh"),
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.sql.session.timeZone=UTC",
            "--conf", "spark.ui.enabled=false",
        ],
        env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    else:
        logs = "\n".join(p.read_text()[-2000:] for p in work.glob("*.out"))
        pytest.fail(f"the Spark Connect server did not start:\n{logs}")
    yield f"sc://127.0.0.1:{port}"
    subprocess.run(["bash", str(home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True, timeout=120)


def probe(cp: str, env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    r = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), cp], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT
    )
    assert "@@" in r.stdout, r.stderr[-3000:]
    return json.loads(r.stdout.split("@@", 1)[1])


@pytest.mark.usefixtures("spark")
def test_same_answers_over_spark_connect_as_local(connect_url: str) -> None:
    cp = sample("join_hdfs")
    remote = probe(cp, {**os.environ, "SPARK_REMOTE": connect_url})
    local = probe(cp, {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"})
    assert remote.pop("remote") == connect_url and local.pop("remote") is None
    assert remote == local
    assert [b[:2] for b in remote["batches_via_spark"]] == remote["batches"]  # the URI path works over Connect
    assert ["ord-154", "condition_not_met", None, None, False] in remote["why"]


def test_cli_remote_flag_and_unreachable_server(connect_url: str) -> None:
    args = [sys.executable, str(ROOT / "cli.py"), "why-missing", sample("join_rocksdb"), "ord-155", "ord-6", "--json"]
    r = subprocess.run([*args, "--remote", connect_url], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got = [(x["key"], x["verdict"], x["side"], x["evicted_at_batch"]) for x in json.loads(r.stdout)["results"]]
    assert got == [("ord-155", "waiting_for_other_side", "left", None), ("ord-6", "evicted", "both", 8)]
    t0 = time.time()
    dead = subprocess.run(
        [*args, "--remote", f"sc://127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert dead.returncode == 2 and "does not answer" in dead.stderr and time.time() - t0 < 60


def test_py4j_only_calls_stay_in_the_local_branch() -> None:
    # redirect.py runs inside the user's job (preflight), and asks classic Spark for the plan only on
    # classic Spark (its Connect branch hands over none)
    in_the_job = ROOT / "spark_io" / "preflight" / "redirect.py"
    assert "None if connect else _plan(query)" in in_the_job.read_text()
    for folder in ("spark_io", "analysis", "views"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == in_the_job:
                continue
            src = path.read_text()
            for name in ("sparkContext", "_jvm", "_jsc"):
                if name in src:
                    assert path.name in ("session.py", "jobs.py") and name == "sparkContext", f"{path}: {name}"
    # in session.py, sparkContext is used only after the remote branch has returned
    tree = ast.parse((ROOT / "spark_io" / "runtime" / "session.py").read_text())
    build = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_build")
    src = ast.get_source_segment((ROOT / "spark_io" / "runtime" / "session.py").read_text(), build) or ""
    assert src.index("if _target.remote:") < src.index("sparkContext")
    # in jobs.py, every use of sparkContext sits in the branch for classic Spark
    jobs_src = (ROOT / "spark_io" / "runtime" / "jobs.py").read_text()
    for i in [i for i in range(len(jobs_src)) if jobs_src.startswith("sparkContext", i)]:
        before = jobs_src[:i]
        assert before.rfind("remote") > before.rfind("def "), "a sparkContext call outside a remote check"
