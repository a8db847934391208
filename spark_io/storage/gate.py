"""Who may read what: the one gate every byte read for a user passes, checked where it really is.

Bounds: ``STATELENS_ALLOWED_ROOTS`` (everybody, the CLI included) and, on a shared server, the
signed-in user's roots (``bind_user``: the run of a page and the threads it starts). Without
either nothing is bounded (one user on a laptop).

* ``check_allowed``: the path a user gave (a checkpoint, an event log, an input or sink folder, a
  prefix to list), before any request: ``..`` and links resolved, prefixes on a path boundary.
* ``open_file``, ``real_file``, ``real_dir``, ``admitted_entry`` (for ``storage.local``): each local
  file and folder as it is opened: the file the descriptor really holds (``/proc/self/fd``, so a
  link swapped in after a check is still caught) must lie inside the bounds, a link in a listing
  that leads outside them is skipped and named. ``check_uri`` (for ``storage.cloud``): an object's
  key by prefix.
* ``vet_tree``: a local folder Spark is about to read (its JVM follows links itself): every link
  in it must stay inside the bounds.
* State Lens's own folders (scratch, cache: ``private``) are never opened for a user.

Every refusal and every skipped link goes to the bound user's ``noted`` (the app's audit log) as
well as into the one-line error; what lies outside the bounds is never told, not even whether it
exists: a dangling link is refused as a live one is.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from statelens.analysis.core.errors import NotAllowed
from statelens.spark_io.storage.cache import cache_dir
from statelens.spark_io.storage.locations import canonical, is_local, local_path


@dataclass(frozen=True)
class UserRoots:
    """The roots a signed-in user may open (the access policy's), and where their refusals are noted."""

    user: str
    roots: tuple[str, ...]
    noted: Callable[[str], None] | None = None  # each refusal and skipped link, as one line (the audit log)


_USER: contextvars.ContextVar[UserRoots | None] = contextvars.ContextVar("statelens_user_roots", default=None)
_require_user = False  # a shared server: a location checked with no user bound is refused
_PRIVATE: list[str] = []  # State Lens's own folders (scratch, cache), never opened for a user
_PRIVATE_LOCK = threading.Lock()


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


def bound_user() -> UserRoots | None:
    return _USER.get()


def requires_user() -> bool:
    """Whether this process is a shared server (``require_user``)."""
    return _require_user


def private(folder: str) -> None:
    """``folder`` is State Lens's own (a scratch or cache folder): never opened for a user."""
    real = os.path.realpath(folder)
    with _PRIVATE_LOCK:
        if real not in _PRIVATE:
            _PRIVATE.append(real)


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
    "job": ("Job not allowed", "folders"),
}


_PROCESS_NOTED: list[Callable[[str], None]] = []  # where this process notes refusals made for nobody signed in (the CLI)


def noting(noted: Callable[[str], None]) -> None:
    """Refusals made with no user bound (a CLI command under STATELENS_ALLOWED_ROOTS) go to ``noted``."""
    _PROCESS_NOTED[:] = [noted]


def note(line: str) -> None:
    """A refusal or a skipped link, to the bound user's audit, else to the process's (nothing without one)."""
    user = _USER.get()
    if user is not None:
        if user.noted is not None:
            user.noted(line)
    elif _PROCESS_NOTED:
        _PROCESS_NOTED[0](line)


_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("statelens_gate_quiet", default=False)


def _refused(message: str, title: str) -> NotAllowed:
    if not _QUIET.get():
        note(message)
    return NotAllowed(message, title=title)


def permitted(path: str, what: str = "checkpoint") -> bool:
    """Whether ``path`` may be opened, asked without opening it and without noting a refusal (which
    bundled samples a user is offered)."""
    token = _QUIET.set(True)
    try:
        check_allowed(path, what)
    except NotAllowed:
        return False
    finally:
        _QUIET.reset(token)
    return True


def check_allowed(path: str, what: str = "checkpoint") -> None:
    """Refuse a location outside the allowed roots (when they are set) or outside the signed-in
    user's roots (``as_user``), before any request. ``what``: the kind of location (``KINDS``), named
    in the refusal; the policy file's path is the server's and is not shown to the user.

    Both sides are compared in canonical form (``canonical``): local paths after resolving
    symlinks and ``..``, URIs in their cloud's spelling; a URI with a ``..`` segment is refused."""
    title, plural = KINDS[what]
    roots = allowed_roots()
    if roots and not under(path, roots):
        raise _refused(
            f"{path} is outside the folders this State Lens may open ({', '.join(roots)}). "
            f"Ask whoever runs it to add the {what}'s folder to STATELENS_ALLOWED_ROOTS.",
            title,
        )
    user = _USER.get()
    if user is None and _require_user:
        raise _refused(f"{path} was asked for outside a signed-in session: sign in and ask again.", title)
    if user is not None and not under(path, list(user.roots)):
        mine = f"you may open {', '.join(user.roots)}" if user.roots else f"you may open no {plural[:-1]} yet"
        raise _refused(
            f"{path} is not among the {plural} {user.user} may open ({mine}). "
            "Ask whoever runs this State Lens for a group that may open it.",
            title,
        )
    if (roots or user is not None) and _is_private(path):
        raise _refused(f"{path} is State Lens's own scratch space: it is never opened as a user's {what}.", title)


def under(path: str, roots: list[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one."""
    raw = path.strip()
    local = is_local(raw)
    if not local and ".." in urllib.parse.urlparse(raw).path.split("/"):
        return False
    want = canonical(raw)
    sep = os.sep if local else "/"
    return any(_inside(want, r, sep) for r in (canonical(x) for x in roots if is_local(x) == local))


def _inside(path: str, root: str, sep: str) -> bool:
    return path == root or path.startswith(root.rstrip(sep) + sep)


def _private_folders() -> tuple[str, ...]:
    """State Lens's own folders: the scratch folders made so far, and the cache of remote files."""
    with _PRIVATE_LOCK:
        return (*_PRIVATE, _realpath(str(cache_dir())))


@functools.lru_cache(maxsize=16)
def _realpath(folder: str) -> str:
    return os.path.realpath(folder)


def _is_private(path: str) -> bool:
    if not is_local(path):
        return False
    real = os.path.realpath(local_path(path))
    return any(_inside(real, p, os.sep) for p in _private_folders())


# --------------------------------------------------------------------------- each file as it is opened


@dataclass(frozen=True)
class Bounds:
    """The canonical roots in effect: a real local path or a URI must lie inside every set of them."""

    local: tuple[tuple[str, ...], ...]  # per bound (the allowed roots, the user's): its local roots
    remote: tuple[tuple[str, ...], ...]
    private: tuple[str, ...]
    who: str  # whose bounds, in refusals

    def admits(self, real: str) -> bool:
        """Whether a real local path (links resolved) lies inside the bounds."""
        return all(any(_inside(real, r, os.sep) for r in roots) for roots in self.local) and not any(
            _inside(real, p, os.sep) for p in self.private
        )

    def admits_uri(self, uri: str) -> bool:
        if ".." in urllib.parse.urlparse(uri).path.split("/"):
            return False
        want = canonical(uri)
        return all(any(_inside(want, r, "/") for r in roots) for roots in self.remote)


@functools.lru_cache(maxsize=64)
def _bounds(allowed: tuple[str, ...], user: tuple[str, ...] | None, who: str, private: tuple[str, ...]) -> Bounds:
    sets = [allowed] if allowed else []
    if user is not None:
        sets.append(user)
    local = tuple(tuple(canonical(r) for r in roots if is_local(r)) for roots in sets)
    remote = tuple(tuple(canonical(r) for r in roots if not is_local(r)) for roots in sets)
    return Bounds(local, remote, private, who)


def bounds() -> Bounds | None:
    """The bounds of this context; None: nothing bounds what is read (no allowed roots, no user)."""
    allowed = tuple(allowed_roots())
    user = _USER.get()
    if user is None:
        if _require_user:
            raise _refused("A file was asked for outside a signed-in session: sign in and ask again.", "Not allowed")
        if not allowed:
            return None
    return _bounds(allowed, None if user is None else user.roots, user.user if user else "this State Lens", _private_folders())


_PROC_FD = os.path.isdir("/proc/self/fd")


def _real_of(fd: int, path: str) -> str:
    """Where the file behind ``fd`` really is (as the kernel opened it)."""
    if _PROC_FD:
        return os.readlink(f"/proc/self/fd/{fd}")
    return os.path.realpath(path)  # pragma: no cover - Linux has /proc


def _link_out(path: str, b: Bounds) -> str | None:
    """The first component of ``path`` that is a link leading outside ``b`` (None: none, now)."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        head = os.sep.join(parts[:i])
        if os.path.islink(head) and not b.admits(os.path.realpath(head)):
            return head
    return None


def outside(path: str, b: Bounds) -> NotAllowed:
    """The refusal of a local path that leads outside the bounds: one line naming the link (or the path,
    where no link is to blame: State Lens's own folders, a link swapped back since)."""
    link = _link_out(path, b)
    if link is None:
        return _refused(f"{path} is outside the folders {b.who} may open: it was not read.", "Not allowed")
    return refused_link(link, b)


def refused_link(link: str, b: Bounds) -> NotAllowed:
    """The refusal of ``link``, which leads outside the bounds (where to is not told)."""
    return _refused(
        f"{link} is a link to a place outside the folders {b.who} may open: it was not followed. "
        "Give the folder it points to, if you may open it.",
        "Link not followed",
    )


def _opened(path: str, flags: int) -> tuple[int, str | None]:
    """(descriptor, real path): ``path`` opened with ``flags``, refused when it really lies outside the
    bounds (real path None: nothing bounds the read). A missing file whose links lead outside is
    refused the same way (never told from an existing one)."""
    b = bounds()
    try:
        fd = os.open(path, flags | os.O_CLOEXEC)
    except FileNotFoundError:
        if b is not None and not b.admits(os.path.realpath(path)):
            raise outside(path, b) from None
        raise
    if b is None:
        return fd, None
    real = _real_of(fd, path)
    if not b.admits(real):
        os.close(fd)
        raise outside(path, b)
    return fd, real


def open_file(path: str) -> int:
    """A descriptor of the file at ``path``, for reading, once it is known to lie inside the bounds."""
    return _opened(path, os.O_RDONLY)[0]


def real_file(path: str) -> str:
    """The real path of the file at ``path`` (links resolved), once it is known to lie inside the
    bounds: for the libraries that open files by path (RocksDB, zipfile, pyarrow)."""
    fd, real = _opened(path, os.O_PATH)
    try:
        return real or os.path.realpath(path)
    finally:
        os.close(fd)


def stat(path: str) -> os.stat_result:
    """``os.stat`` of a file or folder inside the bounds."""
    fd, _ = _opened(path, os.O_PATH)
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def real_dir(path: str) -> tuple[int, str | None]:
    """A descriptor of the folder at ``path`` for listing (and its real path), inside the bounds."""
    return _opened(path, os.O_RDONLY | os.O_DIRECTORY)


def admitted_entry(folder_real: str | None, entry: os.DirEntry[str], shown: str) -> bool:
    """Whether a listing shows ``entry`` (``shown``: its path as the user would name it). A link
    leading outside the bounds is refused, naming it (a checkpoint, a sink or a log missing a file
    would answer wrong without a word); inside ``skipped_links`` (a listing of many checkpoints) it
    is skipped, noted and listed."""
    if folder_real is None or not entry.is_symlink():
        return True
    b = bounds()
    if b is None or b.admits(os.path.realpath(os.path.join(folder_real, entry.name))):
        return True
    found = _SKIPPED.get()
    if found is None:
        raise refused_link(shown, b)
    note(f"{shown} is a link to a place outside the folders {b.who} may open: it was skipped.")
    if shown not in found:
        found.append(shown)
    return False


_SKIPPED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("statelens_skipped_links", default=None)


@contextlib.contextmanager
def skipped_links() -> Iterator[list[str]]:
    """Inside the block, a link a listing meets that leads outside the bounds is skipped instead of
    refused, and added to the list given (shared with the threads the block starts)."""
    found: list[str] = []
    token = _SKIPPED.set(found)
    try:
        yield found
    finally:
        _SKIPPED.reset(token)


def check_uri(uri: str) -> None:
    """An object on object storage, by its key: inside the bounds' prefixes."""
    b = bounds()
    if b is not None and not b.admits_uri(uri):
        raise _refused(f"{uri} is outside the folders {b.who} may open: it was not read.", "Not allowed")


def vet_tree(path: str) -> None:
    """Before Spark reads a local folder (its JVM follows links itself): the folder and every link in
    it must lie inside the bounds (the first that does not is refused, named). Not local, or
    nothing bounded: nothing to do."""
    b = bounds()
    if b is None or not is_local(path):
        return
    top = local_path(path)
    real = os.path.realpath(top)
    if not b.admits(real):
        raise outside(top, b)
    stack, seen = [(top, real)], {real}
    while stack:
        shown, here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except (NotADirectoryError, FileNotFoundError, PermissionError):
            continue
        for e in entries:
            named, target = os.path.join(shown, e.name), e.path
            if e.is_symlink():
                target = os.path.realpath(e.path)
                if not b.admits(target):
                    raise refused_link(named, b)
            if e.is_dir() and target not in seen:  # a linked folder inside the bounds: Spark reads it too
                seen.add(target)
                stack.append((named, target))
