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
    run_jobs = false                    # the "Will my change restart?" page runs a user's script: off by default

    [users."carol@example.com"]
    roots = ["/data/checkpoints/carol"]

A user may open a path under any root of any group they are in, or of their own entry; a user in
no group with roots may open nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import tomllib
from dataclasses import dataclass, field
from typing import Any

from analysis.core.errors import InvalidInput

MODES = ("oidc", "proxy")


@dataclass(frozen=True)
class Grant:
    roots: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    run_jobs: bool = False


@dataclass(frozen=True)
class Identity:
    """A signed-in user and what the policy lets them open."""

    user: str
    groups: tuple[str, ...]  # every group they are in (from the provider or proxy, and the policy's members)
    roots: tuple[str, ...]  # the folders and URI prefixes they may open
    run_jobs: bool = False

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

    def identity(self, user: str, claimed: list[str] | tuple[str, ...] = ()) -> Identity:
        """``user`` (an e-mail or subject) with the groups the provider or proxy claims for them."""
        groups = {g for g in claimed if g} | {name for name, g in self.groups.items() if user in g.members}
        grants = [self.groups[g] for g in sorted(groups) if g in self.groups]
        if user in self.users:
            grants.append(self.users[user])
        roots = tuple(dict.fromkeys(r for g in grants for r in g.roots))
        return Identity(user, tuple(sorted(groups)), roots, any(g.run_jobs for g in grants))


def groups_of(value: Any) -> list[str]:
    """A claim or header listing groups: a JSON list, or text separated by commas or spaces."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [g for g in str(value).replace(",", " ").split() if g]


def _grant(where: str, raw: Any) -> Grant:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be a table (roots = [...], members = [...]).")
    unknown = set(raw) - {"roots", "members", "run_jobs"}
    if unknown:
        raise InvalidInput(f"{where} has unknown settings: {', '.join(sorted(unknown))} (use roots, members, run_jobs).")
    for name in ("roots", "members"):
        value = raw.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise InvalidInput(f"{where}.{name} must be a list of strings.")
    if not isinstance(raw.get("run_jobs", False), bool):
        raise InvalidInput(f"{where}.run_jobs must be true or false.")
    return Grant(
        tuple(r.strip() for r in raw.get("roots", [])),
        tuple(m.strip() for m in raw.get("members", [])),
        raw.get("run_jobs", False),
    )


def parse_policy(text: str, source: str) -> Policy:
    """The policy in ``text`` (TOML); a mistake is one InvalidInput naming the setting."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"The access policy {source} is not valid TOML: {e}.") from e
    unknown = set(raw) - {"auth", "groups", "users"}
    if unknown:
        raise InvalidInput(
            f"The access policy {source} has unknown sections: {', '.join(sorted(unknown))} (use auth, groups, users)."
        )
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
    )


_lock = threading.Lock()
_loaded: tuple[tuple[str, float], Policy] | None = None


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
