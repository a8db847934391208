"""Where a path points: a local folder, an object store this process reads itself, or a URI only
Spark can read (``hdfs://`` ...). Whether State Lens may open it is ``gate.py``'s question."""

from __future__ import annotations

import os
import urllib.parse

from statelens.spark_io.storage.azure import Azure
from statelens.spark_io.storage.cloud import Cloud
from statelens.spark_io.storage.gcs import Gcs
from statelens.spark_io.storage.s3 import S3

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
