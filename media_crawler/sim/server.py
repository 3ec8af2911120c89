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
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from media_crawler.sim.api.control import truth
from media_crawler.sim.app import SimulatorApp
from media_crawler.sim.cdn import DEFAULT_URL_LIFETIME_S
from media_crawler.sim.exchange import Request, Response, text_response
from media_crawler.sim.world import DEFAULT_DAYS, DEFAULT_END_DATE, World

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
        media_latency_ms: float = 0.0,
        fault_rate: float = 0.0,
        url_lifetime_s: float = DEFAULT_URL_LIFETIME_S,
        clock: Callable[[], float] | None = None,
        echo_secrets: bool = False,
    ) -> None:
        """`clock` (unix seconds) drives URL signing and expiry: tests pass a fixed one
        to get byte-identical answers or to jump past a URL's lifetime. `echo_secrets`
        turns on the hostile profile that sends credentials back (sim/echo.py)."""
        self.world = World(seed, end_date, days)
        self.app = SimulatorApp(
            self.world, url_lifetime_s=url_lifetime_s, fault_rate=fault_rate, media_latency_ms=media_latency_ms, clock=clock,
            echo_secrets=echo_secrets,
        )
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
        """What GET /_sim/truth answers, without the HTTP round trip."""
        return truth(self.world, self.base_url, self.app.fault_book)


# --- the `media-crawler sim` command -------------------------------------------------

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
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of media GETs answered 503 + Retry-After (seeded)")
    parser.add_argument(
        "--url-lifetime", type=float, default=DEFAULT_URL_LIFETIME_S, help="seconds a signed media URL stays valid"
    )
    parser.add_argument(
        "--echo-secrets", action="store_true",
        help="hostile profile: every API answer echoes the credentials its request carried (sim/echo.py)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; prints the base URL as the only stdout line."""
    try:
        simulator = Simulator(
            args.seed, args.end_date, args.days, args.port,
            media_latency_ms=args.media_latency_ms, fault_rate=args.fault_rate, url_lifetime_s=args.url_lifetime,
            echo_secrets=getattr(args, "echo_secrets", False),
        )
    except ValueError as error:  # --days 0, --fault-rate 2, ...
        print(f"media-crawler sim: {error}", file=sys.stderr)
        return 2
    stopping = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopping.set())
    try:
        simulator.start()
    except OSError as error:
        print(f"media-crawler sim: cannot listen on {HOST}:{args.port}: {error}", file=sys.stderr)
        return 1
    print(simulator.base_url, flush=True)
    try:
        while not stopping.wait(0.5):  # a timed wait lets signal handlers run promptly
            pass
    finally:
        simulator.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="media-crawler sim", description="Serve the simulated platforms on 127.0.0.1.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
