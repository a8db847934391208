"""Amazon S3 and S3-compatible stores (``s3://``, ``s3a://``, ``s3n://``).

Credentials are found as the AWS CLI finds them (the AWS SDK's default chain, inside pyarrow):
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and the
shared config files (SSO profiles included), web identity, the container or instance role.
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` points at an S3-compatible store (MinIO, a private
endpoint); the region is ``AWS_REGION``/``AWS_DEFAULT_REGION``, else asked of the bucket.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from statelens.spark_io.storage.cloud import Cloud

if TYPE_CHECKING:  # pyarrow's filesystems load when a cloud is read (a local question needs none)
    import pyarrow.fs as pafs

CONNECT_TIMEOUT_S = 5
REQUEST_TIMEOUT_S = 30
ATTEMPTS = 3
_SET = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE (aws sso login for SSO), or run where an instance role may read it"


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


class S3(Cloud):
    name = "S3"
    schemes = ("s3", "s3a", "s3n")

    def split(self, uri: str) -> tuple[tuple[str, ...], str, str]:
        p = self.parse(uri)
        bucket = p.netloc
        return ("s3", bucket), bucket + p.path, f"{p.scheme}://{bucket}"

    def canonical(self, uri: str) -> str:
        p = self.parse(uri)
        return f"s3://{p.netloc}{p.path}"

    def filesystem(self, key: tuple[str, ...]) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        bucket = key[1]
        override = endpoint()
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region and not override:
            try:
                region = pafs.resolve_s3_region(bucket)  # the bucket says where it lives
            except OSError:
                region = None  # the read names the problem
        return pafs.S3FileSystem(
            region=region or "us-east-1",
            endpoint_override=override,
            connect_timeout=CONNECT_TIMEOUT_S,
            request_timeout=REQUEST_TIMEOUT_S,
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=ATTEMPTS),
        )

    def explain(self, uri: str, text: str) -> str | None:
        m = re.search(r"AWS Error (\w+)(?: \(HTTP status (\d+)\))?(?: during (\w+) operation)?: ?(.*)", text)
        code, status, detail = (m.group(1), m.group(2) or "", m.group(4).strip()) if m else ("", "", text.splitlines()[0])
        detail = detail.split(" (Request ID")[0].rstrip(".") or code
        where = f" at {endpoint()}" if endpoint() else ""
        if code in ("NO_SUCH_KEY", "RESOURCE_NOT_FOUND") or (status == "404" and "bucket" not in detail.lower()):
            return None
        if code == "NO_SUCH_BUCKET" or "NoSuchBucket" in text:
            return f"{uri}: the bucket does not exist{where}: check the URI (the bucket is the part after s3://)."
        if (
            code in ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "EXPIRED_TOKEN")
            or status in ("401", "403")
            or "credentials" in detail.lower()
        ):
            return f"{uri}: S3 refused the request ({detail}): {_SET}."
        if code in ("SLOW_DOWN", "THROTTLING") or status in ("429", "503"):
            return f"{uri}: S3 is throttling requests ({detail}): try again in a minute."
        if code in ("NETWORK_CONNECTION", "REQUEST_TIMEOUT") or "curl" in text.lower() or "timeout" in text.lower():
            hint = (
                "check AWS_ENDPOINT_URL and that the store is running"
                if endpoint()
                else "check the network and the bucket's region (AWS_REGION)"
            )
            return f"{uri}: S3 did not answer{where} ({detail}): {hint}."
        return f"{uri} could not be read from S3 ({detail})."
