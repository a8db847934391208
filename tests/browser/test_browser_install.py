"""Installed like a tool: the wheel `pip install .` builds gives a `statelens` command, outside the
source folder, with every CLI command, `statelens --version` and `statelens app`."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

from playwright.sync_api import expect

from conftest import free_port
from support import ROOT, copy_package_sources, sample


def test_wheel_gives_a_statelens_command_and_app(tmp_path: Path, browser) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"  # a copy: building never writes into the source folder
    src.mkdir()
    copy_package_sources(src)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(dist)], check=True, timeout=600)
    (wheel,) = dist.glob("state_lens-*.whl")
    with zipfile.ZipFile(wheel) as z:  # one import name: statelens, beside its metadata
        assert {n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")} == {"statelens"}

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    )
    # its dependencies: the ones this project installed, seen through a .pth (pyspark again would take minutes);
    # `pip check` below proves they are the versions the wheel asks for
    (site / "statelens-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True, timeout=300)
    assert subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True).returncode == 0

    statelens = venv / "bin" / "statelens"
    elsewhere = tmp_path / "elsewhere"  # a notebook folder with modules named as this folder's layers
    (elsewhere / "commands").mkdir(parents=True)
    (elsewhere / "views").mkdir()
    for name in ("analysis.py", "spark_io.py", "cli.py", "commands/__init__.py", "views/__init__.py"):
        (elsewhere / name).write_text(f"raise SystemExit('the folder\\'s own {name} was imported')\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(statelens), *args], cwd=elsewhere, capture_output=True, text=True, timeout=300)

    where = subprocess.check_output(
        [str(py), "-c", "import statelens.cli, statelens.views; print(statelens.cli.__file__)"], cwd=elsewhere, text=True
    )
    assert where.startswith(str(site)), where  # the installed modules, not the source folder's
    assert run("--version").stdout.strip() == "State Lens 0.1.0"
    installed = run("overview", sample("join_hdfs"), "--json")
    assert installed.returncode == 0, installed.stderr
    from_source = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "overview", sample("join_hdfs"), "--json"], capture_output=True, text=True
    )
    assert json.loads(installed.stdout) == json.loads(from_source.stdout)
    args = ["why-missing", sample("join_hdfs"), "ord-100", "nope-1", "--engine", "native", "--json"]
    answered = run(*args)
    assert answered.returncode == 0, answered.stderr
    from_source = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True)
    assert answered.stdout == from_source.stdout  # byte for byte
    notebook = subprocess.run(
        [str(py), "-c", f"import statelens; print(statelens.open({sample('join_hdfs')!r}).doctor().to_dict()['restart_batch'])"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
    )
    assert notebook.returncode == 0 and notebook.stdout == "17\n", notebook.stderr  # join_hdfs: 17 batches committed
    bad = run("nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "statelens --help" in bad.stderr

    port = free_port()
    app = subprocess.Popen(
        [str(statelens), "app", "--server.headless", "true", "--server.port", str(port)],
        cwd=elsewhere,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                assert time.time() < deadline, "statelens app did not start"
                time.sleep(0.5)
        page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
        page.goto(f"{url}/?checkpoint={sample('join_hdfs')}")
        expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Last committed")).to_be_visible(timeout=60_000)  # it read the checkpoint
        page.context.close()
    finally:
        app.terminate()
        app.wait(timeout=30)
