"""A warm engine for the CLI: a local Spark Connect server started once, used by later commands.

``cli.py serve`` starts the pinned PySpark's Connect server (``sbin/start-connect-server.sh``) on
a free loopback port and records its URL in ``STATELENS_SERVE_DIR`` (default
``~/.cache/statelens/serve``); every later CLI command that needs Spark finds it there and
connects instead of starting a JVM (unless ``--master``, ``--remote`` or ``SPARK_REMOTE`` say
otherwise). ``cli.py serve --stop`` ends it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from analysis.core.errors import SparkUnavailable
from spark_io.runtime.session import connect_problem, java_problem

START_TIMEOUT_S = 120


def serve_dir() -> Path:
    return Path(os.environ.get("STATELENS_SERVE_DIR", Path.home() / ".cache" / "statelens" / "serve"))


def _state_file() -> Path:
    return serve_dir() / "server.json"


def _env() -> dict[str, str]:
    import pyspark

    d = serve_dir()
    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOG_DIR": str(d),
        "SPARK_PID_DIR": str(d),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def running() -> str | None:
    """The URL of the served engine when it answers, else None."""
    try:
        url = json.loads(_state_file().read_text())["url"]
    except (OSError, ValueError, KeyError):
        return None
    return url if connect_problem(url, timeout=1.0) is None else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start() -> tuple[str, bool]:
    """(URL, started now): the running engine, or a new one."""
    url = running()
    if url:
        return url, False
    problem = java_problem()
    if problem:
        raise SparkUnavailable(problem)
    import pyspark

    d = serve_dir()
    d.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    script = Path(pyspark.__file__).parent / "sbin" / "start-connect-server.sh"
    confs = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.local.dir": str(d / "scratch"),
    }
    args = ["bash", str(script)] + [x for k, v in confs.items() for x in ("--conf", f"{k}={v}")]
    r = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=START_TIMEOUT_S)
    if r.returncode != 0:
        raise SparkUnavailable(f"The Spark Connect server did not start: {(r.stdout + r.stderr).strip()[-300:]}")
    url = f"sc://127.0.0.1:{port}"
    deadline = time.time() + START_TIMEOUT_S
    while connect_problem(url, timeout=1.0) is not None:
        if time.time() > deadline:
            raise SparkUnavailable(f"The Spark Connect server did not answer within {START_TIMEOUT_S} s: see the logs in {d}.")
        time.sleep(0.5)
    _state_file().write_text(json.dumps({"url": url, "port": port}))
    return url, True


def stop() -> bool:
    """End the served engine; False when none was running."""
    was = running() is not None
    if _state_file().exists() or was:
        import pyspark

        script = Path(pyspark.__file__).parent / "sbin" / "stop-connect-server.sh"
        subprocess.run(["bash", str(script)], env=_env(), capture_output=True, timeout=START_TIMEOUT_S)
        _state_file().unlink(missing_ok=True)
    return was
