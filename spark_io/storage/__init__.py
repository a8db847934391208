"""The one way to checkpoint files, input files and event logs: a local folder, or S3, ADLS/Blob
and GCS read natively (``cloud.py``), with a local cache of immutable state files (``cache.py``).
Nothing outside this package opens a path of the user's, and nothing here opens one without the
gate (``gate.py``): each file checked where it really is, as it is opened."""

from __future__ import annotations

from statelens.analysis.core.errors import StorageError
from statelens.spark_io.storage import downloads
from statelens.spark_io.storage.base import Entry, Storage, question
from statelens.spark_io.storage.cloud import CloudStorage
from statelens.spark_io.storage.gate import check_allowed, check_uri
from statelens.spark_io.storage.local import LocalStorage
from statelens.spark_io.storage.locations import cloud_of, is_local, local_path

__all__ = ["CloudStorage", "Entry", "LocalStorage", "Storage", "downloads", "is_native", "open_storage", "question"]


def is_native(path: str) -> bool:
    """Whether this process reads ``path`` itself (a local path, or a cloud URI)."""
    return is_local(path) or cloud_of(path) is not None


def open_storage(path: str, check: bool = True, what: str = "checkpoint") -> Storage:
    """The storage at ``path`` (no request is made); ``check``: refuse it first when it is outside
    the allowed roots (``what`` it is, named in the refusal)."""
    if check:
        check_allowed(path, what)
    if is_local(path):
        return LocalStorage(local_path(path), path.strip())
    cloud = cloud_of(path)
    if cloud is None:
        raise StorageError(
            f"{path}: State Lens reads local folders, s3://, abfss://, wasbs:// and gs:// itself; this one goes through Spark."
        )
    return CloudStorage(cloud, path, check_uri)
