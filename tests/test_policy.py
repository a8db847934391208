"""The access policy of a shared server: groups -> roots, parsed strictly, and every path a signed-in
user's page opens checked against their roots (symlinks and ``..`` resolved, prefixes on a path
boundary), in the threads the page starts too."""

from __future__ import annotations

import contextvars
import os
import threading
from pathlib import Path

import pytest

from statelens.analysis.core.errors import InvalidInput, NotAllowed
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.runtime import policy as runtime_policy
from statelens.spark_io.runtime.policy import groups_of, parse_policy
from statelens.spark_io.storage import gate
from statelens.spark_io.storage.gate import UserRoots, as_user, check_allowed
from support import sample

POLICY = """
[auth]
mode = "proxy"
user_header = "X-Auth-User"
audit_log = "/tmp/audit.jsonl"

[groups.payments]
members = ["dave@example.com"]
roots = ["/data/cp/payments", "s3://lake/payments/"]

[groups.ads]
roots = ["/data/cp/ads"]
run_jobs = true

[users."carol@example.com"]
roots = ["/data/cp/carol"]
"""


def test_a_user_gets_the_roots_of_every_group_they_are_in() -> None:
    p = parse_policy(POLICY, "policy.toml")
    assert (p.mode, p.user_header, p.groups_header, p.audit_log) == (
        "proxy",
        "X-Auth-User",
        "X-Forwarded-Groups",
        "/tmp/audit.jsonl",
    )
    alice = p.identity("alice@example.com", ["payments", "unknown-group"])
    assert alice.roots == ("/data/cp/payments", "s3://lake/payments/") and not alice.run_jobs
    assert alice.groups == ("payments", "unknown-group")
    dave = p.identity("dave@example.com", ["ads"])  # a member by the policy, and by the proxy's claim
    assert dave.groups == ("ads", "payments") and set(dave.roots) == {"/data/cp/ads", "/data/cp/payments", "s3://lake/payments/"}
    assert dave.run_jobs
    carol = p.identity("carol@example.com")
    assert carol.roots == ("/data/cp/carol",) and carol.groups == ()
    assert p.identity("eve@example.com", ["nobody"]).roots == ()  # in no group with roots: nothing


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[auth]\nmode = 'ldap'\n[groups.a]\nroots = ['/x']", "auth.mode must be one of oidc, proxy"),
        ("[groups.a]\nroots = '/x'", "groups.a.roots must be a list of strings"),
        ("[groups.a]\nroot = ['/x']", "unknown settings: root"),
        ("[auth]\nmode = 'oidc'\n", "grants nothing"),
        ("[grups.a]\nroots = ['/x']", "unknown sections: grups"),
        ("[groups.a\nroots = ['/x']", "is not valid TOML"),
        ("[groups.a]\nroots = ['/x']\nrun_jobs = 'yes'", "run_jobs must be true or false"),
    ],
)
def test_a_wrong_policy_is_one_message_naming_the_setting(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        parse_policy(text, "policy.toml")


def test_groups_from_a_claim_or_a_header() -> None:
    assert groups_of(["a", " b ", ""]) == ["a", "b"]
    assert groups_of("a, b c") == ["a", "b", "c"]
    assert groups_of(None) == []


def test_the_policy_file_is_read_again_when_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    monkeypatch.setenv("STATELENS_POLICY", str(path))
    assert runtime_policy.load_policy().groups["ads"].roots == ("/data/cp/ads",)  # type: ignore[union-attr]
    path.write_text(POLICY.replace("/data/cp/ads", "/data/cp/ads2"))
    os.utime(path, (1, 1))  # a different modification time
    assert runtime_policy.load_policy().groups["ads"].roots == ("/data/cp/ads2",)  # type: ignore[union-attr]
    monkeypatch.setenv("STATELENS_POLICY", str(tmp_path / "missing.toml"))
    with pytest.raises(InvalidInput, match="cannot be read"):
        runtime_policy.load_policy()
    monkeypatch.delenv("STATELENS_POLICY")
    assert runtime_policy.load_policy() is None  # no policy: nothing changes


def test_the_audit_log_is_json_lines(tmp_path: Path) -> None:
    p = parse_policy(POLICY.replace("/tmp/audit.jsonl", str(tmp_path / "logs" / "audit.jsonl")), "policy.toml")
    runtime_policy.audit(p, {"event": "question", "user": "alice@example.com", "page": "sql", "params": {"sql": ["SELECT 1"]}})
    runtime_policy.audit(p, {"event": "download", "user": "alice@example.com", "file": "q.csv"})
    import json

    lines = [json.loads(x) for x in (tmp_path / "logs" / "audit.jsonl").read_text().splitlines()]
    assert [x["event"] for x in lines] == ["question", "download"] and all("time" in x for x in lines)


def roots(*paths: str) -> UserRoots:
    return UserRoots("alice@example.com", tuple(paths))


def test_paths_are_checked_against_the_users_roots(tmp_path: Path) -> None:
    team, other = tmp_path / "team", tmp_path / "team-other"
    (team / "cp").mkdir(parents=True)
    other.mkdir()
    (team / "escape").symlink_to(other)  # inside the root by name, outside by where it points
    with as_user(roots(str(team), "s3://lake/payments/")):
        check_allowed(str(team / "cp"))
        check_allowed("s3://lake/payments/orders/cp")
        check_allowed("s3a://lake/payments/orders/cp")  # the same place, Hadoop's spelling
        for refused in (
            str(other),  # a sibling whose name starts with the root's
            str(team / "escape"),
            str(team / ".." / "team-other"),
            "s3://lake/payments-archive/cp",
            "s3://lake/payments/../ads/cp",
            "gs://lake/payments/cp",
        ):
            with pytest.raises(NotAllowed, match=r"not among the checkpoints alice@example\.com may open"):
                check_allowed(refused)
    check_allowed(str(other))  # outside a signed-in run, on a laptop: nothing changes


def test_the_bounds_reach_the_threads_a_page_starts_and_a_read_is_refused_before_it_starts() -> None:
    cp = sample("join_hdfs")
    seen: list[str] = []

    def read() -> None:
        try:
            read_checkpoint(cp)
            seen.append("read")
        except NotAllowed:
            seen.append("refused")

    with as_user(roots(sample("outer_join_clicks"))):
        t = threading.Thread(target=contextvars.copy_context().run, args=(read,))
        t.start()
        t.join()
        with pytest.raises(NotAllowed):
            read_checkpoint(cp)
    with as_user(roots(cp)):
        read()
    assert seen == ["refused", "read"]


def test_a_shared_server_refuses_a_path_asked_on_nobodys_behalf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "_require_user", False)
    gate.require_user()
    try:
        with pytest.raises(NotAllowed, match="outside a signed-in session"):
            check_allowed(sample("join_hdfs"))
        with as_user(roots(sample("join_hdfs"))):
            check_allowed(sample("join_hdfs"))
    finally:
        monkeypatch.setattr(gate, "_require_user", False)


def test_a_refusal_names_what_was_refused_and_not_the_servers_policy_file(tmp_path: Path) -> None:
    """A user refused an event log reads "Event log not allowed", not "Checkpoint"; the policy file's
    path is the server's business (the refusal is in the audit log), not shown to them."""
    from statelens.spark_io.logs.event_logs import read_progress

    cp = sample("dedup_window_chain")
    with as_user(roots(cp)), pytest.raises(NotAllowed) as refused:
        read_progress(str(tmp_path / "logs"), read_checkpoint(cp))
    assert refused.value.title == "Event log not allowed"
    assert refused.value.message == (
        f"{tmp_path / 'logs'} is not among the folders alice@example.com may open (you may open {cp}). "
        "Ask whoever runs this State Lens for a group that may open it."
    )
    with as_user(roots(str(tmp_path))), pytest.raises(NotAllowed) as refused:
        check_allowed(cp)
    assert refused.value.title == "Checkpoint not allowed" and "policy" not in refused.value.message
