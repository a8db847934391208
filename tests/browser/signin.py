"""A shared server as a team deploys it, for the browser tests of sign-in and of attacks: the app
served with an access policy (``statelens app``), a real OpenID Connect provider on loopback
(oidc-provider-mock) with predefined users, and the audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from conftest import free_port
from support import ARTIFACTS, ROOT


def wait_for(url: str, proc: subprocess.Popen[Any], log: Path, what: str) -> None:
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.3)
    proc.kill()
    pytest.fail(f"{what} did not start: {log.read_text()[-2000:]}")


def provider(folder: Path, users: dict[str, dict[str, Any]]) -> Iterator[str]:
    """An OpenID Connect provider on loopback whose sign-in page offers ``users`` (their claims)."""
    port = free_port()
    log_path = folder / "oidc.log"
    claims = [a for u in users.values() for a in ("--user-claims", json.dumps(u))]
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "oidc_provider_mock", "--port", str(port), *claims], stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        wait_for(url + "/.well-known/openid-configuration", proc, log_path, "the OpenID Connect provider")
        yield url
        proc.terminate()
        proc.wait(timeout=30)


def oidc_secrets(provider_url: str) -> str:
    """Streamlit's [auth] section for the provider (APP_PORT: the app's port, filled in by ``serve``)."""
    return (
        '[auth]\nredirect_uri = "http://127.0.0.1:APP_PORT/oauth2callback"\n'
        'cookie_secret = "state-lens-test-cookie-secret-0123456789"\n'
        'client_id = "state-lens"\nclient_secret = "state-lens-secret"\n'
        f'server_metadata_url = "{provider_url}/.well-known/openid-configuration"\n'
    )


def serve(folder: Path, policy: str, secrets: str | None, name: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """The app as the README deploys it for a team (``statelens app``), with the ``policy`` text; its
    working folder holds .streamlit/secrets.toml (Streamlit reads it there)."""
    port = free_port()
    (folder / "policy.toml").write_text(policy)
    if secrets is not None:
        (folder / ".streamlit").mkdir()
        (folder / ".streamlit" / "secrets.toml").write_text(secrets.replace("APP_PORT", str(port)))
    log_path = ARTIFACTS / f"streamlit-{name}.log"
    ARTIFACTS.mkdir(exist_ok=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "cli.py"), "app", "--server.headless", "true", "--server.port", str(port)],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {}), "STATELENS_POLICY": str(folder / "policy.toml")},
        )
        url = f"http://127.0.0.1:{port}"
        wait_for(url + "/_stcore/health", proc, log_path, "the State Lens server")
        yield url
        proc.terminate()
        proc.wait(timeout=30)


def sign_in(page: Any, url: str, user: str, email: str) -> None:
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name=user).click()  # the provider's page: a predefined user
    expect(page.get_by_text(email)).to_be_visible(timeout=60_000)


def audit_lines(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []


def written(audit: Path, check: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """The audit log once a line passes ``check`` (a run's line is written when the run ends, which may
    come after its page shows)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = audit_lines(audit)
        if any(check(x) for x in lines):
            return lines
        time.sleep(0.2)
    pytest.fail(f"no such audit line in {audit}: {audit_lines(audit)[-5:]}")


def link(url: str, page_path: str, **params: str) -> str:
    return f"{url}/{page_path}?{urllib.parse.urlencode(params)}"
