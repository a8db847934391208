"""The shared server's access policy (``STATELENS_POLICY``: a TOML file, see ``analysis.core.policy``)
and its audit log: every question asked, one JSON line each (who, when, which checkpoint, which page,
which keys or query, allowed or refused)."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from typing import Any

from analysis.core.errors import InvalidInput
from analysis.core.policy import Policy, parse_policy

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
