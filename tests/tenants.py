"""Two teams on one shared State Lens, for the attack suite (tests/test_attacks.py, the CLI's door, and
tests/browser/test_browser_attacks.py, the app's in both sign-in modes).

* payments: a real query (tests/jobs/tenant_job.py: CSV orders -> windowed totals per customer ->
  a Parquet sink, with its event log) whose every order and customer holds ``MARK``; with its query
  id, what must never reach the other team.
* ads: the attacker, with a checkpoint of their own (the bundled outer_join_clicks and its event
  log) and, in their own root, what an attacker plants: folders of links into payments' files,
  a checkpoint whose state partitions are links, a link to a missing place, a linked folder for
  listings, logs crafted to name payments' input files; beside their root a look-alike folder.

Built once for a whole run (every pytest-xdist worker shares it, under a lock).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import ROOT, SAMPLES

MARK = "PAYMARK7Q"  # in every value of payments' query: searched for in whatever ads sees
JOB = ROOT / "tests" / "jobs" / "tenant_job.py"


class Teams:
    """The two teams' folders, under ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.pay, self.ads = base / "payments", base / "ads"
        self.orders, self.clicks = self.pay / "orders", self.ads / "clicks"
        # what ads plants, in their own root
        self.mirror = self.ads / "mirror"  # a folder whose entries are links into payments' checkpoint
        self.halfcopy = self.ads / "halfcopy"  # a checkpoint of logs of its own whose state partitions are links
        self.escape = self.ads / "escape"  # a link given as the checkpoint
        self.dangling = self.ads / "dangling"  # a link to a place that does not exist
        self.logs = self.ads / "logs-linked"  # an event-log folder holding links
        self.sink = self.ads / "sink-linked"  # a sink folder of linked files (its log a copy)
        self.inputs = self.ads / "inputs-linked"  # a folder of links to payments' input files
        self.team = self.ads / "team"  # a linked folder, for listings
        self.crafted = self.ads / "crafted"  # ads's own checkpoint whose sources log names payments' input files
        self.lookalike = self.base / "ads-evil" / "orders"  # beside ads's root, a folder whose name starts with it

    @property
    def query_id(self) -> str:
        return str(json.loads((self.orders / "metadata").read_text())["id"])

    def secrets(self) -> tuple[str, ...]:
        """What of payments' must never be seen by ads."""
        return (MARK, self.query_id)

    def leaked(self, text: str) -> list[str]:
        return [s for s in self.secrets() if s in text]

    def policy(self, mode: str, audit: Path, jobs: Path | None = None) -> str:
        """The shared server's access policy: payments and ads, each its own root; ads may run the
        jobs of ``jobs`` (a folder), with a date argument."""
        text = (
            f'[auth]\nmode = "{mode}"\naudit_log = "{audit}"\n'
            f'[groups.payments]\nroots = ["{self.pay}"]\n'
            f'[groups.ads]\nroots = ["{self.ads}"]\n'
        )
        if jobs is not None:
            text += f'run_jobs = true\n[[groups.ads.jobs]]\nfolder = "{jobs}"\nargs = ["--date=*"]\n'
        return text


def _plant(t: Teams) -> None:
    ads = t.ads
    shutil.copytree(SAMPLES / "outer_join_clicks", t.clicks)
    shutil.copytree(SAMPLES / "event_logs" / "outer_join_clicks", ads / "logs")
    t.mirror.mkdir()
    for entry in sorted(t.orders.iterdir()):
        (t.mirror / entry.name).symlink_to(entry)
    partitions = t.orders / "state" / "0"
    shutil.copytree(t.orders, t.halfcopy, ignore=lambda d, names: [n for n in names if Path(d) == partitions and n.isdigit()])
    (t.halfcopy / "metadata").write_text('{"id":"00000000-0000-4000-8000-0000000000ad"}')  # its own id
    for part in sorted(partitions.iterdir()):
        if part.name.isdigit():
            (t.halfcopy / "state" / "0" / part.name).symlink_to(part)
    t.escape.symlink_to(t.orders)
    t.dangling.symlink_to(t.pay / "orders-gone")
    t.logs.mkdir()
    for f in (t.pay / "logs").iterdir():
        (t.logs / f.name).symlink_to(f)
    (t.sink / "_spark_metadata").mkdir(parents=True)
    for f in (t.pay / "sink" / "_spark_metadata").iterdir():
        shutil.copy2(f, t.sink / "_spark_metadata" / f.name)
    for f in (t.pay / "sink").glob("*.parquet"):
        (t.sink / f.name).symlink_to(f)
    t.inputs.mkdir()
    (t.inputs / "orders").symlink_to(t.pay / "inputs" / "orders")
    t.team.symlink_to(t.pay)
    shutil.copytree(t.clicks, t.crafted)
    for log in sorted((t.crafted / "sources").glob("*/*")):
        if log.name.isdigit():
            lines = log.read_text().splitlines()
            entry = json.loads(lines[1])
            entry["path"] = f"file://{t.pay / 'inputs' / 'orders' / 'part-00000.csv'}"
            log.write_text("\n".join([lines[0], json.dumps(entry), *lines[2:]]))
    shutil.copytree(t.orders, t.lookalike)


def build(shared: Path) -> Teams:
    """The two teams under ``shared`` (made by the first caller of a run; the others wait for it)."""
    shared.mkdir(parents=True, exist_ok=True)
    t = Teams(shared / "teams")
    with open(shared / "teams.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "teams.done").exists():
            shutil.rmtree(t.base, ignore_errors=True)
            env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
            r = subprocess.run([sys.executable, str(JOB), str(t.pay), MARK], capture_output=True, text=True, env=env, timeout=600)
            assert r.returncode == 0, r.stderr[-3000:]
            _plant(t)
            (shared / "teams.done").write_text("ok")
    return t
