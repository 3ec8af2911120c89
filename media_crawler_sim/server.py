"""HTTP plumbing for the simulator: a ThreadingHTTPServer on 127.0.0.1 (never another
interface: the simulator exists for tests and demos), the `Simulator` object tests
start and stop, and the `media-crawler sim` command.

    with Simulator(seed=1, port=0) as sim:      # port 0: any free port
        requests.get(sim.base_url + "/_sim/truth")
"""
from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
import traceback
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from media_crawler_sim.app import Behaviour, SimulatorApp
from media_crawler_sim.cdn import DEFAULT_URL_LIFETIME_S
from media_crawler_sim.exchange import Request, Response, text_response
from media_crawler_sim.scale import truth as paged
from media_crawler_sim.scale.options import MEDIA_SIZES, WorldSize
from media_crawler_sim.scale.world import BigWorld
from media_crawler_sim.world import DEFAULT_DAYS, DEFAULT_END_DATE, World

HOST = "127.0.0.1"
DEFAULT_PORT = 8787


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so clients' connection pools are exercised
    server_version = "media-crawler-sim/1"
    disable_nagle_algorithm = True  # avoid 40 ms delayed-ACK stalls between headers and body

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the stdlib's name
        pass  # quiet: /_sim/stats is the record of what happened

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)  # drain the body so the connection stays usable
        self._serve()

    def _serve(self) -> None:
        app: SimulatorApp = self.server.app  # type: ignore[attr-defined]
        split = urlsplit(self.path)
        pairs = tuple(parse_qsl(split.query, keep_blank_values=True))
        request = Request(self.command, unquote(split.path), pairs, self.headers, app.base_url)
        try:
            response = app.dispatch(request)
        except Exception:  # a simulator bug must show up in the test, not kill the thread
            response = text_response(500, "simulator error\n" + traceback.format_exc())
        recorded = app.echo.clean(request).path if app.echo.enabled else request.path  # stats name real paths
        app.stats.record(recorded, response.status, self._write(response))

    def _write(self, response: Response) -> int:
        """Send the response; returns the body bytes actually sent."""
        if response.stream is not None:
            return self._write_chunked(response)
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command == "HEAD" or response.status in (204, 304):
            return 0
        body = response.body if response.cut_after is None else response.body[: response.cut_after]
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return 0
        if response.cut_after is not None:
            # Announced more than we sent: drop the connection like a failed transfer.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(body)


    def _write_chunked(self, response: Response) -> int:
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return 0
        sent = 0
        try:
            for chunk in response.stream:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a simulator bug mid-stream: the unterminated body tells the client
            traceback.print_exc()
            self.close_connection = True
        return sent


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Simulator:
    def __init__(
        self,
        seed: int = 1,
        end_date: date = DEFAULT_END_DATE,
        days: int = DEFAULT_DAYS,
        port: int = 0,
        *,
        behaviour: Behaviour = Behaviour(),
        size: WorldSize | None = None,
    ) -> None:
        """behaviour: latency, faults, URL lifetime and clock, the echo profile (media_crawler_sim/app.py).

        size: serve a generated world of that size instead of the demo world
        (media_crawler_sim/scale/): built lazily, its truth read in pages. `WorldSize.of(...)`
        makes one from the command line's scale options."""
        self.world = World(seed, end_date, days) if size is None else BigWorld(size, seed, end_date, days)
        self.app = SimulatorApp(self.world, behaviour)
        self._requested_port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "Simulator":
        if self._server is not None:
            raise RuntimeError("simulator already started")
        server = _Server((HOST, self._requested_port), _Handler)
        server.app = self.app  # type: ignore[attr-defined]
        self.app.base_url = f"http://{HOST}:{server.server_port}"
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="media-crawler-sim", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> "Simulator":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("simulator not started")
        return self._server.server_port

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def echoed_credentials(self) -> list[str]:
        """The credential values the echo profile saw in requests (in-process only)."""
        return self.app.echo.seen()

    def truth(self) -> dict:
        """What GET /_sim/truth answers, without the HTTP round trip (for a generated
        world, a header: read its entries with `truth_media()`)."""
        return paged.truth(self.world, self.base_url, self.app.fault_book)

    def truth_media(self) -> Iterator[dict]:
        """Every truth `media` entry, one at a time (what /_sim/truth.ndjson streams)."""
        return paged.iter_media(self.world, self.base_url, self.app.fault_book)

    def sources(self) -> Iterator[dict]:
        """Every source as a sources.yaml entry (`{"weibo": "user 7000000001", "api": "ajax"}`)."""
        return paged.iter_sources(self.world, self.base_url)

    def write_sources(self, path: str | Path) -> Path:
        """A sources.yaml crawling every account of this world from this simulator."""
        return write_sources_yaml(self.world, self.base_url, path)


def write_sources_yaml(world, base_url: str, path: str | Path) -> Path:
    path = Path(path)
    with open(path, "w", encoding="utf-8") as out:
        for chunk in paged.sources_yaml(world, base_url):
            out.write(chunk)
    return path


# --- the `media-crawler sim` command -------------------------------------------------

_SCALE_OPTIONS = (
    "accounts", "bilibili_users", "weibo_users", "facebook_pages", "url_lists", "posts_per_day", "media_per_post",
    "media_size",
)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port on 127.0.0.1 (default {DEFAULT_PORT}; 0 = any free port)"
    )
    parser.add_argument("--seed", type=int, default=1, help="world seed: same seed, same accounts, posts and media bytes")
    parser.add_argument(
        "--end-date", type=date.fromisoformat, default=DEFAULT_END_DATE, help="last UTC day with content (YYYY-MM-DD)"
    )
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="number of UTC days ending --end-date")
    parser.add_argument("--media-latency-ms", type=float, default=0.0, help="delay before every media answer")
    parser.add_argument("--api-latency-ms", type=float, default=0.0,
                        help="delay before every platform API answer (feed pages, play URLs, keys)")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of media GETs answered 503 + Retry-After (seeded)")
    parser.add_argument(
        "--url-lifetime", type=float, default=DEFAULT_URL_LIFETIME_S, help="seconds a signed media URL stays valid"
    )
    parser.add_argument(
        "--echo-secrets", action="store_true",
        help="hostile profile: every API answer echoes the credentials its request carried (media_crawler_sim/echo.py)",
    )
    scale = parser.add_argument_group(
        "world size",
        "any of these serves a generated world of that size instead of the demo world (media_crawler_sim/scale/)"
    )
    scale.add_argument("--accounts", type=int, help="accounts on every platform (each platform's own option wins)")
    scale.add_argument("--bilibili-users", type=int, help="Bilibili uploaders")
    scale.add_argument("--weibo-users", type=int, help="Weibo users (even ones m.weibo.cn, odd ones the weibo.com ajax API)")
    scale.add_argument("--facebook-pages", type=int, help="Facebook pages (even ones cursor paging, odd ones time paging)")
    scale.add_argument("--url-lists", type=int, help="URL-list feeds")
    scale.add_argument("--posts-per-day", type=int, help="posts per account and day (default 2)")
    scale.add_argument(
        "--media-per-post", type=int,
        help="Bilibili parts / Weibo pictures / Facebook photos / URL-list files per post (default 2)",
    )
    scale.add_argument("--media-size", choices=tuple(MEDIA_SIZES), help="small: 0.3-3 KB files (default); demo: the demo's sizes")
    scale.add_argument(
        "--print-sources", action="store_true",
        help="print the world's sources.yaml (API bases on 127.0.0.1:--port) and exit without serving",
    )
    scale.add_argument("--write-sources", metavar="PATH", help="write the world's sources.yaml to PATH once listening")


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; prints the base URL as the only stdout line."""
    try:
        behaviour = Behaviour(
            media_latency_ms=args.media_latency_ms, api_latency_ms=getattr(args, "api_latency_ms", 0.0),
            fault_rate=args.fault_rate, url_lifetime_s=args.url_lifetime,
            echo_secrets=getattr(args, "echo_secrets", False),
        )
        size = WorldSize.of(**{name: getattr(args, name, None) for name in _SCALE_OPTIONS})
        simulator = Simulator(args.seed, args.end_date, args.days, args.port, behaviour=behaviour, size=size)
    except ValueError as error:  # --days 0, --fault-rate 2, ...
        print(f"media-crawler sim: {error}", file=sys.stderr)
        return 2
    if getattr(args, "print_sources", False):
        if not args.port:
            print("media-crawler sim: --print-sources needs the --port the simulator will listen on", file=sys.stderr)
            return 2
        for chunk in paged.sources_yaml(simulator.world, f"http://{HOST}:{args.port}"):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return 0
    stopping = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopping.set())
    try:
        simulator.start()
    except OSError as error:
        print(f"media-crawler sim: cannot listen on {HOST}:{args.port}: {error}", file=sys.stderr)
        return 1
    if getattr(args, "write_sources", None):
        simulator.write_sources(args.write_sources)
    print(simulator.base_url, flush=True)
    print(content_days_note(args.end_date, args.days, simulator.base_url, getattr(args, "write_sources", None)), file=sys.stderr, flush=True)
    try:
        while not stopping.wait(0.5):  # a timed wait lets signal handlers run promptly
            pass
    finally:
        simulator.stop()
    return 0


def content_days_note(end_date: date, days: int, base_url: str, sources_path: str | None) -> str:
    """What a person needs to crawl this world (stderr; stdout keeps the base URL alone): the
    days it has content for (other days are empty) and how its sources.yaml is written."""
    first = end_date - timedelta(days=days - 1)
    span = first.isoformat() if days == 1 else f"{first.isoformat()} to {end_date.isoformat()}"
    port = base_url.rsplit(":", 1)[-1]
    sources = (f"its sources.yaml is {sources_path}" if sources_path else
               f"write its sources.yaml with this command plus `--port {port} --print-sources > sources.yaml` "
               "(or start it with `--write-sources sources.yaml`)")
    return (f"content published on {span} (UTC, {days} day(s)); other days hold nothing. "
            f"{sources}; then `media-crawler crawl --config sources.yaml --day {end_date.isoformat()}`")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="media-crawler sim", description="Serve the simulated platforms on 127.0.0.1.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
