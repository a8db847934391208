"""Real object-storage servers on loopback for the tests and benchmarks: moto's S3 API server,
Azurite (Microsoft's Azure Storage emulator) and gcp-storage-emulator, each behind a proxy that
counts requests by method and path and may add latency (as a real region does).

``ObjectStores.start(tmp)`` starts all three; ``upload(store, local, bucket/prefix)`` copies a
folder with the cloud's own API (pyarrow's filesystems). Nothing here is a mock: the reads under
test speak each cloud's protocol to a server that implements it.
"""

from __future__ import annotations

import http.client
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from support import ROOT

AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_BIN = ROOT / ".tools" / "node_modules" / ".bin" / "azurite-blob"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CountingProxy:
    """A loopback HTTP/1.1 proxy in front of one server: ``requests`` lists (method, path) of every
    request; ``delay`` seconds are added to each (round-trip latency)."""

    def __init__(self, upstream_port: int, delay: float = 0.0) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.requests: list[tuple[str, str]] = []
        self.fail = False  # True: answer nothing (a server that stopped)
        proxy = self
        upstream = threading.local()  # one kept connection to the server per handler thread

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()  # headers and body go out as separate writes: no Nagle delay between them
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                proxy.requests.append((self.command, self.path))
                if proxy.fail:
                    self.close_connection = True
                    self.connection.close()
                    return
                if proxy.delay:
                    time.sleep(proxy.delay)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "proxy-connection")}
                conn = getattr(upstream, "conn", None)
                try:
                    if conn is None:
                        raise ConnectionError
                    conn.request(self.command, self.path, body=body, headers=headers)
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                    resp = conn.getresponse()
                except (ConnectionError, http.client.HTTPException, OSError):  # a kept connection the server closed
                    conn = upstream.conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                    conn.connect()
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def methods(self) -> Counter[str]:
        return Counter(m for m, _ in self.requests)

    @contextmanager
    def counting(self) -> Iterator[list[tuple[str, str]]]:
        """The requests made inside the block."""
        start = len(self.requests)
        got: list[tuple[str, str]] = []
        yield got
        got += self.requests[start:]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s")


@dataclass
class Server:
    name: str  # s3, azure, gcs
    proc: subprocess.Popen[bytes]
    port: int
    proxy: CountingProxy
    env: dict[str, str] = field(default_factory=dict)  # how a client finds it and its credentials

    def stop(self) -> None:
        self.proxy.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_s3(tmp: Path, delay: float = 0.0) -> Server:
    port = free_port()
    exe = shutil.which("moto_server", path=str(Path(os.sys.executable).parent)) or "moto_server"
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port, proc, "moto_server")
    proxy = CountingProxy(port, delay)
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return Server("s3", proc, port, proxy, env)


def start_azure(tmp: Path, delay: float = 0.0) -> Server:
    port = free_port()
    proc = subprocess.Popen(
        [str(AZURITE_BIN), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent", "--skipApiVersionCheck",
         "--loose", "--inMemoryPersistence"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _wait_port(port, proc, "azurite")
    proxy = CountingProxy(port, delay)
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{proxy.port}/{AZURITE_ACCOUNT};"
    )
    return Server("azure", proc, port, proxy, {"AZURE_STORAGE_CONNECTION_STRING": conn})


def start_gcs(tmp: Path, delay: float = 0.0) -> Server:
    port = free_port()
    exe = shutil.which("gcp-storage-emulator", path=str(Path(os.sys.executable).parent)) or "gcp-storage-emulator"
    proc = subprocess.Popen(
        [exe, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _wait_port(port, proc, "gcp-storage-emulator")
    proxy = CountingProxy(port, delay)
    return Server("gcs", proc, port, proxy, {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{proxy.port}"})


STARTERS = {"s3": start_s3, "azure": start_azure, "gcs": start_gcs}
BUCKET = "statelens-test"


def uri_of(server: str, key: str) -> str:
    """The URI a user gives for ``key`` in the test bucket or container."""
    if server == "s3":
        return f"s3://{BUCKET}/{key}"
    if server == "azure":
        return f"abfss://{BUCKET}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{key}"
    return f"gs://{BUCKET}/{key}"


def writer(server: Server):  # type: ignore[no-untyped-def]
    """A pyarrow filesystem that may write (for uploading the samples; State Lens's own never does)."""
    import pyarrow.fs as pafs

    if server.name == "s3":
        return pafs.S3FileSystem(
            endpoint_override=f"http://127.0.0.1:{server.port}", access_key="testing", secret_key="testing",
            region="us-east-1", allow_bucket_creation=True,
        )  # fmt: skip
    if server.name == "azure":
        return pafs.AzureFileSystem(
            account_name=AZURITE_ACCOUNT, account_key=AZURITE_KEY, blob_storage_authority=f"127.0.0.1:{server.port}",
            blob_storage_scheme="http", dfs_storage_authority=f"127.0.0.1:{server.port}", dfs_storage_scheme="http",
        )  # fmt: skip
    return pafs.GcsFileSystem(anonymous=True, endpoint_override=f"127.0.0.1:{server.port}", scheme="http", project_id="test")


def without_local_checksums(src: Path, dest: Path) -> Path:
    """A copy of a checkpoint as Spark writes it to object storage: without the hidden ``.X.crc``
    files Hadoop's local file system adds beside each file (S3A, ABFS and GCS write none)."""
    shutil.copytree(src, dest, ignore=lambda _d, names: [n for n in names if n.startswith(".") and n.endswith(".crc")])
    return dest


def upload(server: Server, local: Path, key: str) -> str:
    """Copy a local folder to ``key`` in the test bucket (straight to the server, not counted; 8
    files at a time) and return the folder's URI."""
    files = [p for p in sorted(local.rglob("*")) if p.is_file()]
    if server.name == "s3":  # boto3 (moto's own dependency): one request a file
        import boto3

        client = boto3.client(
            "s3", endpoint_url=f"http://127.0.0.1:{server.port}", aws_access_key_id="testing",
            aws_secret_access_key="testing", region_name="us-east-1",
        )  # fmt: skip
        with suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=BUCKET)

        def put(p: Path) -> None:
            client.put_object(Bucket=BUCKET, Key=f"{key}/{p.relative_to(local).as_posix()}", Body=p.read_bytes())
    else:
        fs = writer(server)
        with suppress(OSError):
            fs.create_dir(BUCKET)

        def put(p: Path) -> None:
            data = p.read_bytes()
            if server.name == "gcs" and data:  # the JSON API's one-request upload: pyarrow's resumable one
                # takes three, and the emulator rewrites its whole object list at each (1,069 files: 10.5 s, not
                # 25.6 s); it drops an empty one's connection
                name = urllib.parse.quote(f"{key}/{p.relative_to(local).as_posix()}", safe="")
                url = f"http://127.0.0.1:{server.port}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={name}"
                request = urllib.request.Request(url, data=data, method="POST")
                request.add_header("Content-Type", "application/octet-stream")
                with urllib.request.urlopen(request, timeout=60) as answer:
                    answer.read()
                return
            with fs.open_output_stream(f"{BUCKET}/{key}/{p.relative_to(local).as_posix()}", compression=None) as out:
                out.write(data)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))
    return uri_of(server.name, key)
