"""`cli.py serve`: a warm Spark Connect server that later CLI commands use on their own.

The commands after `serve` run where Java cannot be found (JAVA_HOME points nowhere), so only
the served engine can answer them; after `serve --stop` the same command fails with one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, sample

pytestmark = pytest.mark.jvm  # the CLI's warm Spark server


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, env=env, timeout=600, cwd="/"
    )


def test_serve_two_commands_and_stop(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"} | {"STATELENS_SERVE_DIR": str(tmp_path / "serve")}
    no_java = env | {"JAVA_HOME": str(tmp_path / "no-java")}
    try:
        first = cli("serve", env=env)
        assert (
            first.returncode == 0
            and first.stdout.startswith("started: Spark Connect at sc://localhost:")
            and "token=" not in first.stdout
        ), first.stderr
        again = cli("serve", env=env)
        assert again.returncode == 0 and again.stdout.startswith("already serving"), again.stderr
        # the engine answers only with its token, kept where only its user reads it
        state = tmp_path / "serve" / "server.json"
        assert state.stat().st_mode & 0o777 == 0o600 and (tmp_path / "serve").stat().st_mode & 0o777 == 0o700
        port = json.loads(state.read_text())["port"]
        for url in (f"sc://localhost:{port}", f"sc://127.0.0.1:{port}", f"sc://localhost:{port}/;token=guess"):
            probe = subprocess.run(
                [sys.executable, "-c", f"from pyspark.sql import SparkSession as S; S.builder.remote({url!r}).getOrCreate().range(1).collect()"],
                capture_output=True, text=True, env=env, timeout=300,
            )  # fmt: skip
            assert probe.returncode != 0 and "UNAUTHENTICATED" in probe.stderr, (url, probe.stderr[-1500:])
        for key, verdict in (("ord-154", "condition_not_met"), ("ord-0", "evicted")):
            # Spark reads: the served engine answers, no JVM of the command's own (no Java here)
            r = cli("why-missing", sample("join_hdfs"), key, "--json", "--engine", "spark", env=no_java)
            assert r.returncode == 0 and r.stderr == "", r.stderr
            assert json.loads(r.stdout)["results"][0]["verdict"] == verdict
            assert json.loads(r.stdout)["engine"] == "spark"
    finally:
        stopped = cli("serve", "--stop", env=env)
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped")
    assert cli("serve", "--status", env=env).stdout.strip() == "not serving"
    after = cli("why-missing", sample("join_hdfs"), "ord-154", "--engine", "spark", env=no_java)
    assert after.returncode == 2 and len(after.stderr.strip().splitlines()) == 1 and "Java was not found" in after.stderr
    native = cli("why-missing", sample("join_hdfs"), "ord-154", "--json", env=no_java)  # auto: no Spark needed
    assert native.returncode == 0 and json.loads(native.stdout)["engine"] == "native"
