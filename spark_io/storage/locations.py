"""Where a path points: a local folder, an object store this process reads itself, or a URI only
Spark can read (``hdfs://`` ...); and whether State Lens may open it (``STATELENS_ALLOWED_ROOTS``)."""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

from analysis.core.errors import NotAllowed
from spark_io.storage.azure import Azure
from spark_io.storage.cloud import Cloud
from spark_io.storage.gcs import Gcs
from spark_io.storage.s3 import S3

CLOUDS: tuple[Cloud, ...] = (S3(), Azure(), Gcs())


def scheme_of(path: str) -> str:
    scheme = urllib.parse.urlparse(path.strip()).scheme.lower()
    return "" if len(scheme) == 1 else scheme  # a Windows drive letter is not a scheme


def is_local(path: str) -> bool:
    """A plain path or a file:// URI is a local folder, unless STATELENS_LOGS_VIA_SPARK is set
    (which sends file:// URIs through the Spark reader, as for remote storage)."""
    scheme = scheme_of(path)
    if scheme == "file":
        return not os.environ.get("STATELENS_LOGS_VIA_SPARK")
    return scheme == ""


def cloud_of(path: str) -> Cloud | None:
    """The object store a URI is on (s3://, s3a://, abfss://, wasbs://, gs:// ...), else None."""
    scheme = scheme_of(path)
    return next((c for c in CLOUDS if scheme in c.schemes), None)


def local_path(path: str) -> str:
    """A local path or ``file:`` URI as a plain path, with ~ expanded: ``file:///data/x``,
    Spark's one-slash ``file:/data/x``, ``file://localhost/data/x``, percent-encoded
    ``file:///data/my%20checkpoint`` -> ``/data/my checkpoint``."""
    raw = path.strip()
    if raw.lower().startswith("file:"):
        parsed = urllib.parse.urlparse(raw)
        return urllib.parse.unquote(parsed.path) if parsed.netloc in ("", "localhost") else raw
    return os.path.expanduser(raw)


def canonical(path: str) -> str:
    """One spelling per place: a local path resolved (symlinks, ``..``), a cloud URI in its cloud's
    form, any other URI without its trailing slash."""
    raw = path.strip()
    if is_local(raw):
        return os.path.realpath(local_path(raw))
    cloud = cloud_of(raw)
    out = cloud.canonical(raw) if cloud else raw
    return out.rstrip("/")


@dataclass(frozen=True)
class UserRoots:
    """The roots a signed-in user may open (the access policy's)."""

    user: str
    roots: tuple[str, ...]


_USER: contextvars.ContextVar[UserRoots | None] = contextvars.ContextVar("statelens_user_roots", default=None)
_require_user = False  # a shared server: a location checked with no user bound is refused


def require_user() -> None:
    """From now on, in this process, a location checked where no user is bound is refused (the
    shared server turns this on: nothing is opened on nobody's behalf)."""
    global _require_user
    _require_user = True


def bind_user(user: UserRoots | None) -> None:
    """Check every location against ``user``'s roots in this context (a run of a page) and the
    threads started with a copy of it (the storage pools are)."""
    _USER.set(user)


@contextlib.contextmanager
def as_user(user: UserRoots | None) -> Iterator[None]:
    """``bind_user`` inside the block only."""
    token = _USER.set(user)
    try:
        yield
    finally:
        _USER.reset(token)


def allowed_roots() -> list[str]:
    """STATELENS_ALLOWED_ROOTS: folders or URI prefixes, separated by commas or newlines."""
    raw = os.environ.get("STATELENS_ALLOWED_ROOTS", "")
    return [r.strip() for r in re.split(r"[,\n]", raw) if r.strip()]


# What a refused location is, in the refusal: (its title, what the user may open of its kind)
KINDS = {
    "checkpoint": ("Checkpoint not allowed", "checkpoints"),
    "event log": ("Event log not allowed", "folders"),
    "input": ("Input files not allowed", "folders"),
    "sink": ("Sink not allowed", "folders"),
    "folder": ("Folder not allowed", "folders"),
}


def check_allowed(path: str, what: str = "checkpoint") -> None:
    """Refuse a location outside the allowed roots (when they are set) or outside the signed-in
    user's roots (``as_user``), before any request. ``what``: the kind of location (``KINDS``), named
    in the refusal; the policy file's path is the server's and is not shown to the user.

    Both sides are compared in canonical form (``canonical``): local paths after resolving
    symlinks and ``..``, URIs in their cloud's spelling; a URI with a ``..`` segment is refused."""
    title, plural = KINDS[what]
    roots = allowed_roots()
    if roots and not under(path, roots):
        raise NotAllowed(
            f"{path} is outside the folders this State Lens may open ({', '.join(roots)}). "
            f"Ask whoever runs it to add the {what}'s folder to STATELENS_ALLOWED_ROOTS.",
            title=title,
        )
    user = _USER.get()
    if user is None and _require_user:
        raise NotAllowed(f"{path} was asked for outside a signed-in session: sign in and ask again.", title=title)
    if user is not None and not under(path, list(user.roots)):
        mine = f"you may open {', '.join(user.roots)}" if user.roots else f"you may open no {plural[:-1]} yet"
        raise NotAllowed(
            f"{path} is not among the {plural} {user.user} may open ({mine}). "
            "Ask whoever runs this State Lens for a group that may open it.",
            title=title,
        )


def under(path: str, roots: list[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one."""
    raw = path.strip()
    local = is_local(raw)
    if not local and ".." in urllib.parse.urlparse(raw).path.split("/"):
        return False
    want = canonical(raw)
    sep = os.sep if local else "/"
    return any(want == r or want.startswith(r.rstrip(sep) + sep) for r in (canonical(x) for x in roots if is_local(x) == local))
