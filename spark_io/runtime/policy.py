"""The shared server's access policy and its audit log: who may open which checkpoints, and every
question asked, one JSON line each (who, when, which checkpoint, which page, which keys or query,
allowed or refused). The policy is a small TOML file (``STATELENS_POLICY``), groups -> roots:

    [auth]
    mode = "oidc"                       # "oidc": Streamlit's st.login ([auth] in .streamlit/secrets.toml)
                                        # "proxy": a reverse proxy's identity headers, trusted as sent
    groups_claim = "groups"             # oidc: the ID token's claim listing the user's groups
    user_header = "X-Forwarded-Email"   # proxy: the header naming the user
    groups_header = "X-Forwarded-Groups"  # proxy: the header listing the groups (comma-separated)
    audit_log = "/var/log/statelens/audit.jsonl"   # every question, as JSON lines

    [groups.payments]
    members = ["alice@example.com"]     # besides those the provider or proxy puts in the group
    roots = ["/data/checkpoints/payments", "s3://lake/payments/"]
    run_jobs = false                    # the "Will my change restart?" page runs a job on the server: off by default

    [[groups.payments.jobs]]            # with run_jobs: the jobs it may run, and nothing else
    script = "/srv/jobs/payments/orders.py"   # one script (links resolved), or
    # folder = "/srv/jobs/payments"           # any .py directly in this folder
    args = ["--date=*", "--dry-run"]    # each argument must match one of these (fnmatch); none: no arguments

    [users."carol@example.com"]
    roots = ["/data/checkpoints/carol"]

    [serve]
    enabled = false                     # `statelens serve` (a warm Spark Connect engine) may start on this host

A user may open a path under any root of any group they are in, or of their own entry; a user in
no group with roots may open nothing. A job runs only when a grant of theirs names its script, with
arguments its rules match, and every argument naming a path or URI names one they may open.
"""

from __future__ import annotations

import collections
import contextvars
import datetime as dt
import fnmatch
import hashlib
import json
import os
import sys
import threading
import tomllib
from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.core.errors import InvalidInput, NotAllowed
from statelens.spark_io.storage import gate

MODES = ("oidc", "proxy")


@dataclass(frozen=True)
class JobGrant:
    """A job a group may run: one ``script``, or any ``.py`` directly in ``folder``, with the arguments
    ``args`` match (fnmatch patterns, one per argument)."""

    script: str | None = None
    folder: str | None = None
    args: tuple[str, ...] = ()

    def admits(self, script: str) -> bool:
        """Whether ``script`` (its real path) is this grant's."""
        if self.script is not None:
            return script == os.path.realpath(self.script)
        assert self.folder is not None
        return script.endswith(".py") and os.path.dirname(script) == os.path.realpath(self.folder)

    def refused_arg(self, args: list[str]) -> str | None:
        """The first argument no pattern matches (None: all match)."""
        return next((a for a in args if not any(fnmatch.fnmatchcase(a, p) for p in self.args)), None)

    def describe(self) -> str:
        return self.script or f"{self.folder}/*.py"

    def scripts(self) -> list[str]:
        """The scripts this grant names (a folder's, listed now)."""
        if self.script is not None:
            return [self.script]
        assert self.folder is not None
        try:
            return sorted(os.path.join(self.folder, n) for n in os.listdir(self.folder) if n.endswith(".py"))
        except OSError:
            return []


@dataclass(frozen=True)
class Grant:
    roots: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    run_jobs: bool = False
    jobs: tuple[JobGrant, ...] = ()


@dataclass(frozen=True)
class Identity:
    """A signed-in user and what the policy lets them open."""

    user: str
    groups: tuple[str, ...]  # every group they are in (from the provider or proxy, and the policy's members)
    roots: tuple[str, ...]  # the folders and URI prefixes they may open
    run_jobs: bool = False
    jobs: tuple[JobGrant, ...] = ()  # what they may run (with run_jobs)

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "groups": list(self.groups)}


@dataclass(frozen=True)
class Policy:
    source: str  # where it was read from, named in refusals
    mode: str = "oidc"
    groups_claim: str = "groups"
    user_header: str = "X-Forwarded-Email"
    groups_header: str = "X-Forwarded-Groups"
    audit_log: str | None = None
    groups: dict[str, Grant] = field(default_factory=dict)
    users: dict[str, Grant] = field(default_factory=dict)
    serve: bool = False  # [serve] enabled: `statelens serve` may start a warm engine on this host

    def identity(self, user: str, claimed: list[str] | tuple[str, ...] = ()) -> Identity:
        """``user`` (an e-mail or subject) with the groups the provider or proxy claims for them."""
        groups = {g for g in claimed if g} | {name for name, g in self.groups.items() if user in g.members}
        grants = [self.groups[g] for g in sorted(groups) if g in self.groups]
        if user in self.users:
            grants.append(self.users[user])
        roots = tuple(dict.fromkeys(r for g in grants for r in g.roots))
        run_jobs = any(g.run_jobs for g in grants)
        jobs = tuple(dict.fromkeys(j for g in grants if g.run_jobs for j in g.jobs))
        return Identity(user, tuple(sorted(groups)), roots, run_jobs, jobs)


def groups_of(value: Any) -> list[str]:
    """A claim or header listing groups: a JSON list, or text separated by commas or spaces."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [g for g in str(value).replace(",", " ").split() if g]


def _job(where: str, raw: Any) -> JobGrant:
    if not isinstance(raw, dict) or set(raw) - {"script", "folder", "args"} or ("script" in raw) == ("folder" in raw):
        raise InvalidInput(f'{where} must name one script or one folder: script = "/srv/jobs/job.py", args = [...].')
    for name in ("script", "folder"):
        if name in raw and (not isinstance(raw[name], str) or not os.path.isabs(raw[name])):
            raise InvalidInput(f"{where}.{name} must be an absolute path.")
    args = raw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise InvalidInput(f'{where}.args must be a list of patterns ("--date=*").')
    return JobGrant(raw.get("script"), raw.get("folder"), tuple(args))


def _grant(where: str, raw: Any) -> Grant:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be a table (roots = [...], members = [...]).")
    unknown = set(raw) - {"roots", "members", "run_jobs", "jobs"}
    if unknown:
        raise InvalidInput(f"{where} has unknown settings: {', '.join(sorted(unknown))} (use roots, members, run_jobs, jobs).")
    for name in ("roots", "members"):
        value = raw.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise InvalidInput(f"{where}.{name} must be a list of strings.")
    if not isinstance(raw.get("run_jobs", False), bool):
        raise InvalidInput(f"{where}.run_jobs must be true or false.")
    jobs = raw.get("jobs", [])
    if not isinstance(jobs, list):
        raise InvalidInput(f"{where}.jobs must be a list of tables: [[...jobs]] script = ..., args = [...].")
    return Grant(
        tuple(r.strip() for r in raw.get("roots", [])),
        tuple(m.strip() for m in raw.get("members", [])),
        raw.get("run_jobs", False),
        tuple(_job(f"{where}.jobs[{i}]", j) for i, j in enumerate(jobs)),
    )


def parse_policy(text: str, source: str) -> Policy:
    """The policy in ``text`` (TOML); a mistake is one InvalidInput naming the setting."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"The access policy {source} is not valid TOML: {e}.") from e
    unknown = set(raw) - {"auth", "groups", "users", "serve"}
    if unknown:
        raise InvalidInput(
            f"The access policy {source} has unknown sections: {', '.join(sorted(unknown))} (use auth, groups, users, serve)."
        )
    serve = raw.get("serve", {})
    if not isinstance(serve, dict) or set(serve) - {"enabled"} or not isinstance(serve.get("enabled", False), bool):
        raise InvalidInput(f"The access policy {source}: [serve] takes one setting, enabled = true or false.")
    auth = raw.get("auth", {})
    mode = auth.get("mode", "oidc")
    if mode not in MODES:
        raise InvalidInput(f"The access policy {source}: auth.mode must be one of {', '.join(MODES)}, not {mode!r}.")
    known = {"mode", "groups_claim", "user_header", "groups_header", "audit_log"}
    if set(auth) - known:
        raise InvalidInput(f"The access policy {source}: unknown auth settings {', '.join(sorted(set(auth) - known))}.")
    groups = {str(n): _grant(f"{source}: groups.{n}", g) for n, g in raw.get("groups", {}).items()}
    users = {str(n): _grant(f"{source}: users.{n!r}", g) for n, g in raw.get("users", {}).items()}
    if not groups and not users:
        raise InvalidInput(f"The access policy {source} grants nothing: add [groups.NAME] with roots = [...].")
    defaults = Policy(source)
    return Policy(
        source,
        mode,
        str(auth.get("groups_claim", defaults.groups_claim)),
        str(auth.get("user_header", defaults.user_header)),
        str(auth.get("groups_header", defaults.groups_header)),
        str(auth["audit_log"]) if auth.get("audit_log") else None,
        groups,
        users,
        serve.get("enabled", False),
    )


_lock = threading.Lock()
_loaded: tuple[tuple[str, float], Policy] | None = None
_MADE_FOR: collections.OrderedDict[str, set[str]] = collections.OrderedDict()  # a download's sha256 -> its users
MAX_DOWNLOADS = 10_000


def policy_path() -> str | None:
    return os.environ.get("STATELENS_POLICY", "").strip() or None


def load_policy() -> Policy | None:
    """The policy, read again when its file changes; None without ``STATELENS_POLICY`` (one user on a
    laptop: nothing changes)."""
    global _loaded
    path = policy_path()
    if path is None:
        return None
    try:
        stamp = (path, os.stat(path).st_mtime)
    except OSError as e:
        raise InvalidInput(f"STATELENS_POLICY names {path}, which cannot be read ({e.strerror or e}): fix the path.") from e
    with _lock:
        if _loaded is not None and _loaded[0] == stamp:
            return _loaded[1]
    with open(path, encoding="utf-8") as f:
        policy = parse_policy(f.read(), path)
    with _lock:
        _loaded = (stamp, policy)
    return policy


_JOBS: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("statelens_jobs", default=None)


def bind_jobs(who: Identity | None) -> None:
    """What the signed-in user of this context (a run of a page) may run (``check_job``)."""
    _JOBS.set(who)


def check_job(command: list[str], cwd: str | None) -> str | None:
    """The folder a job runs in, once it may run. With a signed-in user bound (a shared server) only a
    Python script one of their grants names runs, with arguments its rules match, each argument
    naming a path or URI naming one they may open, in the script's own folder; anything else is
    refused (``NotAllowed``, one line). Without one (the CLI, a notebook: the user's own process)
    the command runs as given."""
    who = _JOBS.get()
    if who is None:
        if gate.bound_user() is not None or gate.requires_user():
            raise NotAllowed("Jobs run only for a signed-in user of a group allowed to run them.", title="Job not allowed")
        return cwd
    if len(command) < 2 or command[0] not in (sys.executable, "python", "python3"):
        raise NotAllowed(
            f"{who.user} may run Python scripts the access policy names, not {' '.join(command[:1])}.", title="Job not allowed"
        )
    script, args = os.path.realpath(command[1]), command[2:]
    grants = [j for j in who.jobs if j.admits(script)]
    if not grants:
        named = ", ".join(j.describe() for j in who.jobs) or "none"
        raise NotAllowed(
            f"{command[1]} is not among the jobs {who.user} may run (the access policy names: {named}). "
            "Ask whoever runs this State Lens to add it to your group's jobs.",
            title="Job not allowed",
        )
    if all(j.refused_arg(args) is not None for j in grants):
        bad = grants[0].refused_arg(args)
        allowed = ", ".join(grants[0].args) or "none"
        raise NotAllowed(
            f"The argument {bad!r} is not one {command[1]} may be given here (the access policy allows: {allowed}).",
            title="Job not allowed",
        )
    for a in args:
        value = a.split("=", 1)[1] if a.startswith("-") and "=" in a else a
        if value.startswith(("/", "~")) or "://" in value:
            gate.check_allowed(value, "job")
    return os.path.dirname(script)


def made_for(content: bytes, user: str) -> None:
    """A download was made for ``user``: it is served to them (``download_owners``), to nobody else."""
    digest = hashlib.sha256(content).hexdigest()
    with _lock:
        _MADE_FOR.setdefault(digest, set()).add(user)
        _MADE_FOR.move_to_end(digest)
        while len(_MADE_FOR) > MAX_DOWNLOADS:
            _MADE_FOR.popitem(last=False)


def download_owners(digest: str) -> frozenset[str]:
    """The users a download (by its sha256) was made for."""
    with _lock:
        return frozenset(_MADE_FOR.get(digest, ()))


def audit(policy: Policy | None, entry: dict[str, Any]) -> None:
    """Append one question to the policy's audit log (nothing without a policy or an audit log)."""
    if policy is None or not policy.audit_log:
        return
    line = json.dumps(
        {"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"), **entry}, ensure_ascii=False, default=str
    )
    with _lock:
        os.makedirs(os.path.dirname(os.path.abspath(policy.audit_log)), exist_ok=True)
        with open(policy.audit_log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
