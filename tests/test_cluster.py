"""The Spark path on a real standalone cluster: a master and a worker started from the pinned
PySpark's ``sbin/spark-daemon.sh`` on loopback, the diagnoses run with ``--master
spark://127.0.0.1:PORT`` (so Spark reads, in executors of their own JVMs), and their answers
compared with the local ones (read natively)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import sample

pytestmark = pytest.mark.jvm  # a standalone Spark cluster

WORKER_SIZE = ("--cores", "2", "--memory", "2g")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ok, seconds: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(1)
    raise AssertionError(f"the standalone {what} did not come up in {seconds:.0f} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    import pyspark

    home = Path(pyspark.__file__).parent
    daemon = str(home / "sbin" / "spark-daemon.sh")
    root = tmp_path_factory.mktemp("standalone")
    work = root / "work"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_NO_DAEMONIZE"}
    env |= {
        "SPARK_HOME": str(home),
        "SPARK_PID_DIR": str(root),
        "SPARK_LOG_DIR": str(root),
        "SPARK_WORKER_DIR": str(work),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master = "org.apache.spark.deploy.master.Master"
    worker = "org.apache.spark.deploy.worker.Worker"
    subprocess.run(
        [daemon, "start", master, "1", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())],
        env=env,
        check=True,
        capture_output=True,
    )
    try:

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait("master", listening)
        subprocess.run(
            [daemon, "start", worker, "1", "--host", "127.0.0.1", "--webui-port", str(_free_port()), *WORKER_SIZE, url],
            env=env,
            check=True,
            capture_output=True,
        )
        logs = lambda: "".join(p.read_text(errors="replace") for p in root.glob("*Master*.out"))  # noqa: E731
        _wait("worker", lambda: "Registering worker" in logs())
        yield url, work
    finally:
        for cls in (worker, master):
            subprocess.run([daemon, "stop", cls, "1"], env=env, capture_output=True)


DIAGNOSES = """
import json, sys
from statelens.spark_io.gather import checkup
from statelens.spark_io.runtime import session
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.gather.workspace import Workspace
session.configure(master=sys.argv[1])
cp = sys.argv[2]
out = {
    "why_missing": why_missing(cp, KeyQuestion(("ord-153", "ord-1", "ord-999"))).to_dict(),
    "skew": checkup.skew(cp).to_dict(),
    "growth": checkup.growth(cp, store="left-keyWithIndexToValue").to_dict(),
    "sql": Workspace(cp).execute("SELECT count(*) AS n FROM op0_left").table.to_pylist(),
}
print(json.dumps(out, default=str))
"""


def _answers(out: dict) -> dict:  # type: ignore[type-arg]
    return {
        name: {k: v for k, v in answer.items() if not k.startswith("engine")} if isinstance(answer, dict) else answer
        for name, answer in out.items()
    }


def test_diagnoses_on_a_standalone_cluster_equal_the_local_ones(cluster: tuple[str, Path]) -> None:
    """One driver process with --master: why-missing, skew, growth and SQL read through Spark in
    the cluster's executors; the same run locally reads natively; the answers are equal."""
    import sys

    url, work = cluster
    cp = sample("join_hdfs")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "STATELENS_ENGINE")}
    root = str(Path(__file__).resolve().parent.parent)
    run = [sys.executable, "-c", f"import sys; sys.path.insert(0, {root!r})\n" + DIAGNOSES]
    on_cluster = subprocess.run([*run, url, cp], env=env, capture_output=True, text=True, timeout=600)
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    local = subprocess.run([*run, "local[2]", cp], env=env, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr[-3000:]
    remote, here = json.loads(on_cluster.stdout), json.loads(local.stdout)
    assert remote["why_missing"]["engine"] == "spark" and here["why_missing"]["engine"] == "native"
    assert remote["skew"]["engine"] == "spark" and remote["growth"]["engine"] == "spark"
    assert _answers(remote) == _answers(here)
    assert list(work.glob("app-*/*/stderr")), "no executor ran in the worker (its work folder has no application)"
