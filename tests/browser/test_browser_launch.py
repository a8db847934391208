"""How the app is served when started as the README says (scripts/start.sh, i.e. cli.py app):
on loopback only, without Streamlit's file watcher, without the Deploy button; the user's
Streamlit options win."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import expect

from conftest import AppServer, free_port
from support import ROOT


def listening_addresses(port: int) -> set[str]:
    """The local addresses a socket listens on at this port, from the kernel's own tables."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


LOOPBACK = "0100007F"  # 127.0.0.1, as /proc/net/tcp writes it


def inotify_watches(pid: int) -> int:
    total = 0
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        with contextlib.suppress(OSError):  # a descriptor closed meanwhile
            total += fdinfo.read_text().count("inotify wd:")
    return total


def test_served_on_loopback_without_file_watcher_or_deploy_button(app_server: AppServer, page) -> None:  # type: ignore[no-untyped-def]
    port = int(app_server.url.rsplit(":", 1)[1])
    assert listening_addresses(port) == {LOOPBACK}
    page.goto(app_server.url)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
    # Streamlit's file watcher would watch every folder below the project (.venv included)
    assert inotify_watches(app_server.pid) == 0
    expect(page.get_by_role("button", name="Main menu")).to_be_visible()
    expect(page.get_by_role("button", name="Deploy")).to_have_count(0)


def test_the_users_address_wins() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "cli.py", "app", "--server.headless", "true", "--server.port", str(port), "--server.address", "0.0.0.0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not listening_addresses(port):
            time.sleep(0.3)
        assert listening_addresses(port) == {"00000000"}  # every interface, as asked
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_not_a_streamlit_option_is_one_line() -> None:
    done = subprocess.run([sys.executable, "cli.py", "app", "8600"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "'8600' is not a Streamlit option" in done.stderr, done.stderr
