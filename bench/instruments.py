"""What the benchmarks measure with, in one place: wall time of a call repeated, the host's
load, CPU of process trees (by process role) and of reaped children, the simulator in its
own process, the simulator's request counters against the rate budget, and a local HTTP
server that gives every GET the same answer."""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

BIN = Path(sys.executable).parent
TICK = os.sysconf("SC_CLK_TCK")


# --- time and load -----------------------------------------------------------------

def timed(fn, repeat: int = 3):
    """({median_ms, runs_ms}, the last value) of `fn()` called `repeat` times."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return dict(median_ms=round(1000 * statistics.median(times), 1), runs_ms=[round(1000 * x, 1) for x in times]), value


def load_1min() -> float:
    """The host's 1-minute load average: what else competed for the cores while a row ran."""
    return os.getloadavg()[0]


# --- CPU of process trees ------------------------------------------------------------

def _stat(pid: int):
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is state (field 3); ppid 4, session 6, utime 14, stime 15, cutime 16, cstime 17
    return dict(ppid=int(fields[1]), sid=int(fields[3]), own=int(fields[11]) + int(fields[12]),
                children=int(fields[13]) + int(fields[14]))


class CpuSampler(threading.Thread):
    """CPU ticks of every process in the given sessions, plus of explicit pids (PostgreSQL backends)."""

    def __init__(self, interval: float = 0.5, backends=None) -> None:
        super().__init__(daemon=True)
        self.sessions: set[int] = set()
        self.interval, self.backends = interval, backends
        self.last: dict[int, dict] = {}
        self.roles: dict[int, str] = {}
        self.backend_ticks: dict[int, int] = {}
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def add_session(self, pid: int) -> None:
        self.sessions.add(pid)

    def sample(self) -> None:
        seen = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            stat = _stat(int(entry))
            if stat and stat["sid"] in self.sessions:
                seen[int(entry)] = stat
        with self.lock:
            for pid in list(self.last):
                if pid not in seen:
                    self.last[pid]["gone"] = True
            for pid, stat in seen.items():
                self.last[pid] = stat
                if pid not in self.roles:
                    self.roles[pid] = process_role(pid)
        if self.backends:
            for pid in self.backends():
                stat = _stat(pid)
                if stat:
                    self.backend_ticks[pid] = max(self.backend_ticks.get(pid, 0), stat["own"])

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.sample()

    def _roots(self) -> list[int]:
        """The processes whose own + cutime count: the live ones, and exited ones whose parent
        was never sampled (an orphan, a session leader). An exited process whose parent was
        sampled, live or not, is in that parent's cutime: the parent reaped it. (Counting it
        again when the parent had exited too counted every run worker of a replaced code
        server twice, up to 20:00 on 2026-12-01.)"""
        return [pid for pid, s in self.last.items() if not s.get("gone") or s["ppid"] not in self.last]

    def ticks(self) -> int:
        self.sample()
        with self.lock:
            return sum(self.last[pid]["own"] + self.last[pid]["children"] for pid in self._roots())

    def ticks_by_role(self) -> dict[str, int]:
        """The ticks of `ticks()` by what each process is (`process_role`). A parent's cutime
        is split into its exited children by their last samples (recursively: a code server's
        children are run workers); what they used after that sample is left to
        "<parent role> (exited children, after last sample)"."""
        self.sample()
        totals: dict[str, int] = defaultdict(int)
        with self.lock:
            kids: dict[int, list[int]] = defaultdict(list)
            for pid, stat in self.last.items():
                if stat.get("gone") and stat["ppid"] in self.last:
                    kids[stat["ppid"]].append(pid)

            def split(pid: int) -> None:
                stat, role = self.last[pid], self.roles.get(pid, "other")
                totals[role] += stat["own"]
                rest = stat["children"]
                for kid in kids.get(pid, ()):
                    split(kid)
                    rest -= self.last[kid]["own"] + self.last[kid]["children"]
                totals[f"{role} (exited children, after last sample)"] += rest

            for pid in self._roots():
                split(pid)
        return dict(totals)

    def stop(self) -> None:
        self.stopping.set()


# The first of these found in a process's command line names its role in ticks_by_role. The
# code server starts each run worker with multiprocessing's spawn (dagster/_grpc/server.py).
ROLE_MARKS = (("multiprocessing.spawn", "run_worker"), ("multiprocessing.resource_tracker", "run_worker"),
              ("execute_step", "step_worker"), ("api grpc", "code_server"), ("code-server", "code_server"),
              ("dagster-daemon", "daemon"), ("celery", "celery_worker"))




def process_role(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    return next((role for mark, role in ROLE_MARKS if mark in cmdline), "other")


def role_ms_per_item(before: dict[str, int], after: dict[str, int], items: int) -> dict[str, float]:
    return {role: round(ms(after.get(role, 0) - before.get(role, 0)) / max(items, 1), 2)
            for role in sorted(set(before) | set(after))}


def ms(ticks: float) -> float:
    return ticks * 1000.0 / TICK


# --- the simulator, in its own process --------------------------------------------------

class Sim:
    """`media-crawler sim` serving a generated world, in its own process (its CPU apart)."""

    def __init__(self, workdir: Path, world: dict, latency_ms: float, api_latency_ms: float) -> None:
        self.sources = workdir / "sim-sources.yaml"
        argv = [str(BIN / "media-crawler"), "sim", "--port", "0", "--media-latency-ms", str(latency_ms),
                "--api-latency-ms", str(api_latency_ms),
                "--accounts", str(world["accounts"]), "--days", str(world["days"]),
                "--posts-per-day", str(world["posts_per_day"]), "--media-per-post", str(world["media_per_post"]),
                "--media-size", "small", "--write-sources", str(self.sources)]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(workdir / "sim.log", "wb"),
                                        text=True, start_new_session=True)
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"simulator did not start: {(workdir / 'sim.log').read_text()[-2000:]}")

    def stats(self) -> dict:
        import requests

        # The totals only: the per-path part of a 100k-item world is ~0.5 s of the simulator's CPU
        # per poll, and the sampler polls every 0.5 s (it took 93 % of the simulator's CPU).
        return requests.get(f"{self.base_url}/_sim/stats?per_path=0", timeout=10).json()

    def cpu_ms(self) -> float:
        stat = _stat(self.process.pid)
        return ms(stat["own"]) if stat else float("nan")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class RateSampler(threading.Thread):
    """The simulator's request counters every `interval` s; the busiest 1 s window per platform.

    counts: the simulator's requests by path prefix (a Sim's stats over HTTP, or an
    in-process simulator's); rate and burst: the budget `budget()` checks against."""

    def __init__(self, counts: Callable[[], dict], platforms: tuple[str, ...], rate: float = 0.0,
                 burst: float = 0.0, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.counts, self.samples, self.stopping = counts, [], threading.Event()
        self.platforms, self.rate, self.burst, self.interval = platforms, rate, burst, interval

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            try:
                self.samples.append((time.monotonic(), _per_platform(self.counts(), self.platforms)))
            except Exception:
                pass

    def peaks(self) -> dict[str, int]:
        """Requests in the busiest window of >= 1 s (the shortest such window between two samples)."""
        peaks: dict[str, int] = defaultdict(int)
        self.excess: dict[str, float] = defaultdict(float)  # max of count - rate x window: must stay <= burst
        self.longest_window = 0.0
        for i, (t, later) in enumerate(self.samples):
            for t0, earlier in self.samples[:i][::-1]:
                if t - t0 >= 1.0:
                    self.longest_window = max(self.longest_window, t - t0)
                    for name, count in later.items():
                        done = count - earlier.get(name, 0)
                        peaks[name] = max(peaks[name], done)
                        self.excess[name] = max(self.excess[name], done - self.rate * (t - t0))
                    break
        return dict(peaks)

    def budget(self) -> dict:
        self.peaks()
        return dict(rate_excess_over_rate_x_window=dict(self.excess), rate_burst=self.burst,
                    rate_within_budget=all(v <= self.burst for v in self.excess.values()),
                    rate_longest_window_s=self.longest_window)


def _per_platform(requests_by_prefix: dict, platforms: tuple[str, ...]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for prefix, count in requests_by_prefix.items():
        name = prefix.removeprefix("/media").strip("/").split("-")[0].split("/")[0]
        if name in platforms:
            counts[name] += count if isinstance(count, int) else 0
    return dict(counts)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children_cpu_ms() -> float:
    """CPU of this process's reaped children since the last call."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    value = (usage.ru_utime + usage.ru_stime) * 1000
    previous = getattr(children_cpu_ms, "previous", 0.0)
    children_cpu_ms.previous = value
    return value - previous



@contextmanager
def json_server(body: object, delay_s: float = 0.0) -> Iterator[str]:
    """Serve `body` as JSON to every GET on 127.0.0.1, one thread per request, each answer
    after `delay_s` (a slow origin); yields the origin URL."""
    payload = json.dumps(body).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if delay_s:
                time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
