"""A warm engine for the CLI: a local Spark Connect server started once, used by later commands.

``cli.py serve`` starts the pinned PySpark's Connect server (``sbin/start-connect-server.sh``) on
a free loopback port, with a random token it asks of every client (Spark Connect's own pre-shared
key: ``SPARK_CONNECT_AUTHENTICATE_TOKEN``), and records its URL and token in ``STATELENS_SERVE_DIR``
(default ``~/.cache/statelens/serve``, a folder only its user may read); every later CLI command
of that user that needs Spark finds it there and connects instead of starting a JVM (unless
``--master``, ``--remote`` or ``SPARK_REMOTE`` say otherwise), checking its paths against the
allowed roots first as without it. Nobody else who can reach the port gets an answer. Under a
team's access policy it starts only where the policy says ``[serve] enabled = true``.
``cli.py serve --stop`` ends it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

from statelens.analysis.core.errors import InvalidInput, SparkUnavailable
from statelens.spark_io.runtime.policy import load_policy
from statelens.spark_io.runtime.serve_address import running, serve_dir, state_file
from statelens.spark_io.runtime.session import connect_problem, java_problem

START_TIMEOUT_S = 120


def _env(token: str | None = None) -> dict[str, str]:
    import pyspark

    d = serve_dir()
    env = {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOG_DIR": str(d),
        "SPARK_PID_DIR": str(d),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    if token:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token  # the server asks every client for it
    return env


def _refusal() -> str | None:
    """Why ``serve`` may not start here (a team's access policy that does not enable it), or None."""
    policy = load_policy()
    if policy is not None and not policy.serve:
        return (
            "A shared server's access policy is in effect (STATELENS_POLICY) and does not enable the warm engine: "
            "add [serve] enabled = true to it to let `serve` start a token-protected Spark Connect server on this host."
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start() -> tuple[str, bool]:
    """(URL, started now): the running engine, or a new one."""
    refusal = _refusal()
    if refusal:
        raise InvalidInput(refusal)
    url = running()
    if url:
        return url, False
    problem = java_problem()
    if problem:
        raise SparkUnavailable(problem)
    import pyspark

    d = serve_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(d, 0o700)  # the token is read from here: its user's alone
    port = _free_port()
    token = secrets.token_urlsafe(32)
    script = Path(pyspark.__file__).parent / "sbin" / "start-connect-server.sh"
    confs = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.local.dir": str(d / "scratch"),
    }
    args = ["bash", str(script)] + [x for k, v in confs.items() for x in ("--conf", f"{k}={v}")]
    r = subprocess.run(args, env=_env(token), capture_output=True, text=True, timeout=START_TIMEOUT_S)
    if r.returncode != 0:
        raise SparkUnavailable(f"The Spark Connect server did not start: {(r.stdout + r.stderr).strip()[-300:]}")
    # "localhost": PySpark sends a token over loopback without TLS only to that name
    url = f"sc://localhost:{port}/;token={token}"
    deadline = time.time() + START_TIMEOUT_S
    while connect_problem(url, timeout=1.0) is not None:
        if time.time() > deadline:
            raise SparkUnavailable(f"The Spark Connect server did not answer within {START_TIMEOUT_S} s: see the logs in {d}.")
        time.sleep(0.5)
    fd = os.open(state_file(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "port": port}, f)
    return url, True


def stop() -> bool:
    """End the served engine; False when none was running."""
    was = running() is not None
    if state_file().exists() or was:
        import pyspark

        script = Path(pyspark.__file__).parent / "sbin" / "stop-connect-server.sh"
        subprocess.run(["bash", str(script)], env=_env(), capture_output=True, timeout=START_TIMEOUT_S)
        state_file().unlink(missing_ok=True)
    return was
