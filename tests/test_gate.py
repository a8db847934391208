"""The gate (spark_io/storage/gate.py): every byte read for a user checked where it really is.

Two teams side by side, as on a shared server: payments (a real query's checkpoint, event log,
input files and Parquet sink: the bundled file_sink_agg sample) and ads (outer_join_clicks). Ads's
user plants links in their own root into payments' files, as an attacker would: each read through
them is refused in one line naming the link (a listing of many checkpoints skips it and says so),
whether the place it leads to exists or not; the refusal is noted for the audit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import statelens
from statelens.analysis.core.errors import NotAllowed
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.logs.event_logs import read_progress
from statelens.spark_io.runtime import policy, scratch
from statelens.spark_io.storage import LocalStorage, gate
from statelens.spark_io.storage.gate import UserRoots, as_user, check_allowed, vet_tree
from support import ROOT, SAMPLES

PAYMENTS_QUERY = json.loads((SAMPLES / "file_sink_agg" / "metadata").read_text())["id"]


class Teams:
    def __init__(self, base: Path) -> None:
        self.pay, self.ads = base / "payments", base / "ads"
        self.orders, self.logs = self.pay / "orders", self.pay / "logs"
        self.sink, self.inputs = self.pay / "sink", self.pay / "inputs"
        shutil.copytree(SAMPLES / "file_sink_agg", self.orders)
        shutil.copytree(SAMPLES / "event_logs" / "file_sink_agg", self.logs)
        shutil.copytree(SAMPLES / "sinks" / "file_sink_agg", self.sink)
        shutil.copytree(SAMPLES / "inputs" / "file_sink_agg", self.inputs)
        shutil.copytree(SAMPLES / "outer_join_clicks", self.ads / "clicks")
        self.noted: list[str] = []
        # what ads's user plants in their own root
        (self.ads / "mirror").mkdir()
        for entry in sorted(self.orders.iterdir()):
            (self.ads / "mirror" / entry.name).symlink_to(entry)
        partitions = self.orders / "state" / "0"
        shutil.copytree(
            self.orders,
            self.ads / "halfcopy",
            ignore=lambda d, names: [n for n in names if Path(d) == partitions and n.isdigit()],
        )
        for part in sorted((self.orders / "state" / "0").iterdir()):
            if part.name.isdigit():
                (self.ads / "halfcopy" / "state" / "0" / part.name).symlink_to(part)
        (self.ads / "escape").symlink_to(self.orders)
        (self.ads / "dangling").symlink_to(self.pay / "orders-gone")
        (self.ads / "logs").mkdir()
        for f in self.logs.iterdir():
            (self.ads / "logs" / f.name).symlink_to(f)
        (self.ads / "sink" / "_spark_metadata").mkdir(parents=True)
        for f in (self.sink / "_spark_metadata").iterdir():
            shutil.copy2(f, self.ads / "sink" / "_spark_metadata" / f.name)
        for f in self.sink.glob("*.parquet"):
            (self.ads / "sink" / f.name).symlink_to(f)
        (self.ads / "team").symlink_to(self.pay)

    def bob(self) -> UserRoots:
        return UserRoots("bob@example.com", (str(self.ads),), self.noted.append)


@pytest.fixture
def teams(tmp_path: Path) -> Teams:
    return Teams(tmp_path)


def refused_link(link: Path, e: pytest.ExceptionInfo[NotAllowed]) -> Path:
    """One line naming the link (``link``, or a link in the folder ``link``), and nothing of where it
    leads; the link named."""
    assert e.value.title == "Link not followed", e.value
    named = Path(e.value.message.split(" is a link to a place outside the folders ")[0])
    assert named == link or (link.is_dir() and not link.is_symlink() and named.parent == link and named.is_symlink()), e.value
    assert "payments" not in e.value.message and "\n" not in e.value.message
    return named


def test_a_folder_of_links_into_another_teams_checkpoint_is_refused_naming_the_link(teams: Teams) -> None:
    with as_user(teams.bob()), pytest.raises(NotAllowed) as e:
        statelens.open(str(teams.ads / "mirror")).overview()
    refused_link(teams.ads / "mirror", e)  # one of its entries
    assert teams.noted and teams.noted[0] == e.value.message  # for the audit log


def test_a_checkpoint_whose_state_partitions_are_links_reads_its_logs_and_is_refused_its_state(teams: Teams) -> None:
    halfcopy = teams.ads / "halfcopy"
    with as_user(teams.bob()):
        cp = statelens.open(str(halfcopy))
        assert len(cp.overview().to_dict()["batches"]) == 10  # its own logs: a real copy in bob's root
        with pytest.raises(NotAllowed) as e:
            cp.state(0)
        refused_link(halfcopy / "state" / "0", e)  # one of its partitions
        with pytest.raises(NotAllowed) as e:
            vet_tree(str(halfcopy))  # what Spark would be given: refused before it reads
        refused_link(halfcopy / "state" / "0", e)


def test_a_link_to_a_missing_place_is_refused_as_one_to_an_existing_place(teams: Teams) -> None:
    """Whether something exists outside the roots is never told."""
    messages = []
    for name in ("escape", "dangling"):
        with as_user(teams.bob()), pytest.raises(NotAllowed) as e:
            read_checkpoint(str(teams.ads / name))
        messages.append(e.value.message.replace(name, "X"))
        assert "exist" not in e.value.message
    assert messages[0] == messages[1]


def test_an_event_log_folder_holding_a_link_is_refused(teams: Teams) -> None:
    with as_user(teams.bob()):
        info = read_checkpoint(str(teams.ads / "clicks"))
        with pytest.raises(NotAllowed) as e:
            read_progress(str(teams.ads / "logs"), info)
    refused_link(teams.ads / "logs", e)


def test_a_sink_folder_of_linked_files_is_not_searched_and_says_why(teams: Teams) -> None:
    from statelens.spark_io.gather.inputs import search_sink

    with as_user(teams.bob()):
        rows, why = search_sink(str(teams.ads / "sink"), ["user-0"], ["user_id"])
    assert rows == {} and why is not None and "is a link to a place outside the folders" in why
    with as_user(UserRoots("carol", (str(teams.pay),))):  # payments' own user finds the rows
        rows, why = search_sink(str(teams.sink), ["user-0"], ["user_id"])
    assert why is None and rows["user-0"]


def test_a_listing_skips_a_linked_folder_and_names_it(teams: Teams) -> None:
    with as_user(teams.bob()):
        listing = statelens.ls(str(teams.ads))
    # halfcopy is a checkpoint of bob's own (its logs), listed without its linked partitions
    assert sorted(Path(r.path).name for r in listing) == ["clicks", "halfcopy"]
    for link in ("team", "mirror/offsets", "halfcopy/state/0/0"):
        assert str(teams.ads / link) in listing.skipped, listing.skipped
    assert listing.skipped_line() is not None
    assert listing.to_dict()["skipped_links"] == listing.skipped
    assert any(str(teams.ads / "team") in n for n in teams.noted)


def test_a_link_swapped_in_after_the_check_is_caught_when_the_file_is_opened(teams: Teams) -> None:
    swap = teams.ads / "swap"
    shutil.copytree(teams.ads / "clicks", swap)
    with as_user(teams.bob()):
        check_allowed(str(swap))  # a real folder inside bob's root, now
        storage = LocalStorage(swap)
        shutil.rmtree(swap)
        swap.symlink_to(teams.orders)  # then a link to payments' checkpoint
        with pytest.raises(NotAllowed) as e:
            storage.read("metadata")
    refused_link(swap, e)


def test_state_lenss_own_scratch_is_never_opened_for_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even where a root covers the temporary folder it lives in (a user's, or the allowed roots)."""
    own = scratch.session_dir()
    Path(own, "spilled.parquet").write_bytes(b"PAR1")
    everything = str(Path(scratch.process_dir()).parent)
    for user, allowed in ((UserRoots("bob@example.com", (everything,)), None), (None, everything)):
        if allowed:
            monkeypatch.setenv("STATELENS_ALLOWED_ROOTS", allowed)
        with as_user(user):
            with pytest.raises(NotAllowed, match="State Lens's own scratch space"):
                check_allowed(own)
            with pytest.raises(NotAllowed, match=r"spilled\.parquet is outside the folders"):
                LocalStorage(own).read("spilled.parquet")


def test_input_files_outside_the_roots_are_named_the_same_whether_they_exist_or_not(teams: Teams, tmp_path: Path) -> None:
    from statelens.spark_io.gather.inputs import listed_files

    crafted = teams.ads / "crafted"
    shutil.copytree(teams.orders, crafted)
    real = next(teams.inputs.rglob("part-00000.csv"))
    log = crafted / "sources" / "0" / "0"
    log.write_text(log.read_text().replace(json.loads(log.read_text().splitlines()[1])["path"], f"file://{real}"))
    log1 = crafted / "sources" / "0" / "1"
    log1.write_text(log1.read_text().replace(json.loads(log1.read_text().splitlines()[1])["path"], f"file://{real}-gone"))
    with as_user(teams.bob()):
        files, _, _ = listed_files(read_checkpoint(str(crafted)))
    whys = {f.batch_id: f.why for f in files if f.batch_id in (0, 1)}
    assert whys[0] == whys[1] == "outside the folders that may be opened"


def test_the_cli_under_allowed_roots_goes_through_the_same_gate(teams: Teams, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    (tmp_path / "policy.toml").write_text(
        f'[auth]\nmode = "proxy"\naudit_log = "{audit}"\n[groups.ads]\nroots = ["{teams.ads}"]\n'
    )
    env = {**os.environ, "STATELENS_ALLOWED_ROOTS": str(teams.ads), "STATELENS_POLICY": str(tmp_path / "policy.toml")}
    for args, link in (
        (["overview", str(teams.ads / "mirror")], teams.ads / "mirror"),
        (["sql", str(teams.ads / "halfcopy"), "SELECT count(*) FROM op0"], teams.ads / "halfcopy" / "state" / "0"),
        (["progress", str(teams.ads / "clicks"), "--event-log", str(teams.ads / "logs")], teams.ads / "logs"),
    ):
        r = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Link not followed" in r.stderr and PAYMENTS_QUERY not in r.stdout + r.stderr, r.stderr
        assert f"{link}/" in r.stderr and " is a link to a place outside the folders this State Lens may open" in r.stderr
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [x["command"] for x in lines] == ["overview", "sql", "progress"] and {x["door"] for x in lines} == {"cli"}
    assert all("is a link to a place outside" in x["reason"] for x in lines)


JOBS = """
[auth]
mode = "proxy"
[groups.platform]
roots = ["{root}"]
run_jobs = true
[[groups.platform.jobs]]
script = "{script}"
args = ["--date=*", "--dry-run", "--out=*"]
[groups.ads]
roots = ["{root}"]
"""


def test_a_job_runs_only_as_the_policy_names_it(tmp_path: Path) -> None:
    script = tmp_path / "jobs" / "orders.py"
    script.parent.mkdir()
    script.write_text("print('job')\n")
    (tmp_path / "jobs" / "other.py").write_text("print('other')\n")
    p = policy.parse_policy(JOBS.format(root=tmp_path / "team", script=script), "policy.toml")
    platform, ads = p.identity("pat", ["platform"]), p.identity("ann", ["ads"])
    py = sys.executable
    with as_user(UserRoots(platform.user, platform.roots)):
        policy.bind_jobs(platform)
        assert policy.check_job([py, str(script), "--date=2026-11-27", "--dry-run"], "/") == str(script.parent)
        assert policy.check_job([py, str(script), f"--out={tmp_path / 'team' / 'x'}"], None) == str(script.parent)
        for command, says in (
            ([py, str(tmp_path / "jobs" / "other.py")], "is not among the jobs pat may run"),
            ([py, str(script), "--rm=everything"], "The argument '--rm=everything' is not one"),
            ([py, str(script), "--out=/etc/passwd"], "not among the folders pat may open"),
            (["bash", "-c", "cat /etc/passwd"], "may run Python scripts the access policy names"),
        ):
            with pytest.raises(NotAllowed, match=says):
                policy.check_job(command, None)
        policy.bind_jobs(ads)  # a group without run_jobs: nothing
        with pytest.raises(NotAllowed, match="is not among the jobs ann may run"):
            policy.check_job([py, str(script)], None)
    policy.bind_jobs(None)
    assert policy.check_job(["python", "anything.py", "--any"], "/x") == "/x"  # the CLI: the user's own process


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[groups.a]\nroots = ['/x']\njobs = ['/srv/job.py']", r"jobs\[0\] must name one script or one folder"),
        ("[groups.a]\nroots = ['/x']\n[[groups.a.jobs]]\nscript = 'job.py'", "script must be an absolute path"),
        ("[groups.a]\nroots = ['/x']\n[[groups.a.jobs]]\nscript = '/j.py'\nargs = '--x'", "args must be a list of patterns"),
        ("[groups.a]\nroots = ['/x']\n[serve]\nenabled = 'yes'", r"\[serve\] takes one setting"),
    ],
)
def test_a_wrong_job_or_serve_setting_is_one_message(text: str, says: str) -> None:
    from statelens.analysis.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match=says):
        policy.parse_policy(text, "policy.toml")


def test_serve_is_refused_under_a_policy_that_does_not_enable_it(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text('[groups.a]\nroots = ["/x"]\n')
    env = {**os.environ, "STATELENS_POLICY": str(tmp_path / "policy.toml"), "STATELENS_SERVE_DIR": str(tmp_path / "serve")}
    r = subprocess.run([sys.executable, str(ROOT / "cli.py"), "serve"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "[serve] enabled = true" in r.stderr
    assert not (tmp_path / "serve").exists()


def test_a_download_is_served_to_the_users_it_was_made_for() -> None:
    import hashlib

    policy.made_for(b"alice's rows", "alice@example.com")
    digest = hashlib.sha256(b"alice's rows").hexdigest()
    assert policy.download_owners(digest) == {"alice@example.com"}
    assert policy.download_owners(hashlib.sha256(b"other").hexdigest()) == frozenset()


def test_the_gate_costs_nothing_on_a_laptop() -> None:
    """No allowed roots, nobody signed in: nothing bounds a read (one user's own machine)."""
    assert gate.bounds() is None
