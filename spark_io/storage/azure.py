"""Azure Data Lake Storage Gen2 and Blob storage
(``abfss://container@account.dfs.core.windows.net/path``, ``abfs://``, ``wasbs://``, ``wasb://``).

Credentials, first found wins: ``AZURE_STORAGE_CONNECTION_STRING`` for its account (an account
key or a SAS, and its endpoints: Azurite's ``BlobEndpoint`` serves the account's ``abfss://`` URIs
too); ``AZURE_STORAGE_KEY`` or ``AZURE_STORAGE_SAS_TOKEN`` (for ``AZURE_STORAGE_ACCOUNT``, or any
account when unset); a service principal (``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET``,
``AZURE_TENANT_ID``); otherwise Azure's default chain inside pyarrow (workload identity, managed
identity, ``az login``).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import TYPE_CHECKING, Any

from statelens.spark_io.storage.cloud import Cloud

if TYPE_CHECKING:  # pyarrow's filesystems load when a cloud is read (a local question needs none)
    import pyarrow.fs as pafs

_SET = (
    "set AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, a service principal "
    "(AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID), or az login as someone who may read it"
)
DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def connection_string() -> dict[str, str]:
    raw = os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
    out = {}
    for part in raw.split(";"):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    if out.get("UseDevelopmentStorage", "").lower() == "true":
        out.setdefault("AccountName", "devstoreaccount1")
        out.setdefault("AccountKey", DEVSTORE_KEY)
        out.setdefault("BlobEndpoint", "http://127.0.0.1:10000/devstoreaccount1")
    return out


def _authority(endpoint: str, account: str) -> tuple[str, str]:
    """(authority, scheme) pyarrow wants for an endpoint URL: ``https://acct.blob.core.windows.net`` ->
    ``blob.core.windows.net``; an emulator's ``http://127.0.0.1:10000/acct`` -> ``127.0.0.1:10000``."""
    p = urllib.parse.urlparse(endpoint)
    host = p.netloc
    if host.lower().startswith(account.lower() + "."):
        host = host[len(account) + 1 :]
    return host, p.scheme or "https"


class Azure(Cloud):
    name = "Azure"
    schemes = ("abfss", "abfs", "wasbs", "wasb")

    def _parts(self, uri: str) -> tuple[urllib.parse.ParseResult, str, str, str]:
        p = self.parse(uri)
        container, at, host = p.netloc.partition("@")
        if not at or "." not in host:
            raise self.bad(uri)
        account, _, suffix = host.partition(".")
        suffix = re.sub(r"^(dfs|blob)\.", "", suffix)
        return p, container, account, suffix

    @staticmethod
    def bad(uri: str) -> Exception:
        from statelens.analysis.core.errors import StorageError

        return StorageError(
            f"{uri} is not an Azure storage URI: write abfss://<container>@<account>.dfs.core.windows.net/<path>."
        )

    def split(self, uri: str) -> tuple[tuple[str, ...], str, str]:
        p, container, account, suffix = self._parts(uri)
        return ("azure", account, suffix), container + p.path, f"{p.scheme}://{p.netloc}"

    def canonical(self, uri: str) -> str:
        p, container, account, _suffix = self._parts(uri)
        return f"azure://{account.lower()}/{container}{p.path}"

    def filesystem(self, key: tuple[str, ...]) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        _, account, suffix = key
        kw: dict[str, Any] = {
            "blob_storage_authority": f"blob.{suffix}",
            "dfs_storage_authority": f"dfs.{suffix}",
        }
        conn = connection_string()
        named = os.environ.get("AZURE_STORAGE_ACCOUNT", "")
        if conn.get("AccountName", "").lower() == account.lower():
            if conn.get("AccountKey"):
                kw["account_key"] = conn["AccountKey"]
            elif conn.get("SharedAccessSignature"):
                kw["sas_token"] = conn["SharedAccessSignature"]
            if conn.get("BlobEndpoint"):
                kw["blob_storage_authority"], kw["blob_storage_scheme"] = _authority(conn["BlobEndpoint"], account)
                dfs = conn.get("DfsEndpoint") or conn["BlobEndpoint"]  # an emulator serves both on one endpoint
                kw["dfs_storage_authority"], kw["dfs_storage_scheme"] = _authority(dfs, account)
            elif conn.get("DefaultEndpointsProtocol"):
                kw["blob_storage_scheme"] = kw["dfs_storage_scheme"] = conn["DefaultEndpointsProtocol"]
        elif not named or named.lower() == account.lower():
            if os.environ.get("AZURE_STORAGE_KEY"):
                kw["account_key"] = os.environ["AZURE_STORAGE_KEY"]
            elif os.environ.get("AZURE_STORAGE_SAS_TOKEN"):
                kw["sas_token"] = os.environ["AZURE_STORAGE_SAS_TOKEN"].lstrip("?")
        if "account_key" not in kw and "sas_token" not in kw and os.environ.get("AZURE_CLIENT_SECRET"):
            kw.update(
                client_id=os.environ.get("AZURE_CLIENT_ID"),
                client_secret=os.environ["AZURE_CLIENT_SECRET"],
                tenant_id=os.environ.get("AZURE_TENANT_ID"),
            )
        return pafs.AzureFileSystem(account_name=account, **kw)

    def explain(self, uri: str, text: str) -> str | None:
        first = text.splitlines()[0] if text else ""
        m = re.search(r"\b(\d{3}) ([A-Za-z ]+)\s*\n?.*?(?:ErrorCode|x-ms-error-code)[:=]\s*(\w+)", text, re.S)
        status, code = (m.group(1), m.group(3)) if m else ("", "")
        code = code or next(
            iter(
                re.findall(
                    r"\b(ContainerNotFound|BlobNotFound|PathNotFound|AuthenticationFailed|AuthorizationFailure|AuthorizationPermissionMismatch|ServerBusy)\b",
                    text,
                )
            ),
            "",
        )
        detail = code or first[:200]
        if code == "ContainerNotFound" or "ContainerNotFound" in text:
            return f"{uri}: the container does not exist in this account: check the URI (the container is the part before @)."
        if code in ("BlobNotFound", "PathNotFound") or status == "404":
            return None
        if (
            code.startswith("Authori")
            or code == "AuthenticationFailed"
            or status in ("401", "403")
            or "credential" in text.lower()
        ):
            return f"{uri}: Azure refused the request ({detail}): {_SET}."
        if code == "ServerBusy" or status in ("429", "503"):
            return f"{uri}: Azure is throttling requests ({detail}): try again in a minute."
        low = text.lower()
        if any(w in low for w in ("connect", "timeout", "timed out", "curl", "resolve", "sending request", "receiving")):
            return f"{uri}: Azure storage did not answer ({_transport(first)}): check the network and the account's endpoint (AZURE_STORAGE_CONNECTION_STRING's BlobEndpoint for an emulator)."
        return f"{uri} could not be read from Azure storage ({detail})."


def _transport(first: str) -> str:
    """The transport's own words from an error line (after the request it was making)."""
    m = re.search(r"Azure Error: \[[^\]]*\] (.*)", first)
    return (m.group(1) if m else first)[:200].rstrip(". ")
