"""Google Cloud Storage (``gs://``).

Credentials are application default credentials, found as gcloud's tools find them:
``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth application-default login``, the metadata
server of a VM or cluster. ``STORAGE_EMULATOR_HOST`` points at an emulator (no credentials).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import urllib.parse
from typing import TYPE_CHECKING

from statelens.spark_io.storage.cloud import Cloud

if TYPE_CHECKING:  # pyarrow's filesystems load when a cloud is read (a local question needs none)
    import pyarrow.fs as pafs

RETRY_LIMIT_S = 10
_SET = "set GOOGLE_APPLICATION_CREDENTIALS to a key file or run gcloud auth application-default login with an account that may read it"


class Gcs(Cloud):
    name = "GCS"
    schemes = ("gs",)
    lists_folders = False  # pyarrow's GCS listing reads the objects of a page, not its folder prefixes

    def split(self, uri: str) -> tuple[tuple[str, ...], str, str]:
        p = self.parse(uri)
        return ("gcs",), p.netloc + p.path, f"gs://{p.netloc}"

    def canonical(self, uri: str) -> str:
        p = self.parse(uri)
        return f"gs://{p.netloc}{p.path}"

    def filesystem(self, key: tuple[str, ...]) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        emulator = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
        limit = dt.timedelta(seconds=RETRY_LIMIT_S)
        project = os.environ.get("GOOGLE_CLOUD_PROJECT") or None
        if emulator:
            parsed = urllib.parse.urlparse(emulator if "://" in emulator else f"http://{emulator}")
            return pafs.GcsFileSystem(
                anonymous=True, endpoint_override=parsed.netloc, scheme=parsed.scheme, retry_time_limit=limit, project_id=project
            )
        return pafs.GcsFileSystem(retry_time_limit=limit, project_id=project)

    def explain(self, uri: str, text: str) -> str | None:
        first = text.splitlines()[0] if text else ""
        m = re.search(r"error_info=\{reason=([A-Za-z_]*)", text)
        detail = (m.group(1) if m and m.group(1) else first)[:200]
        low = text.lower()
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if "bucket" in low and ("not found" in low or "notfound" in low or "does not exist" in low):
            return f"{uri}: the bucket does not exist: check the URI (the bucket is the part after gs://)."
        if "permission_denied" in low or "unauthenticated" in low or " 401" in text or " 403" in text or "credentials" in low:
            return f"{uri}: GCS refused the request ({detail}): {_SET}."
        if "resource_exhausted" in low or " 429" in text:
            return f"{uri}: GCS is throttling requests ({detail}): try again in a minute."
        if "not_found" in low or " 404" in text or "no such" in low:
            return None
        if "unavailable" in low or "deadline" in low or "connect" in low or "timeout" in low or "retry policy exhausted" in low:
            hint = f"check STORAGE_EMULATOR_HOST={emulator} and that the emulator is running" if emulator else "check the network"
            return f"{uri}: GCS did not answer ({detail}): {hint}."
        return f"{uri} could not be read from GCS ({detail})."
