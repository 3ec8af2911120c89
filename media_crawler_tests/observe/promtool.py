"""Prometheus' own tools for the tests: promtool (check metrics, check rules, test rules) and a
real prometheus scraping the exporter. Debian's `prometheus` package provides both
(.ci/install_prometheus.sh); where absent the tests skip, and under CI
(MEDIA_CRAWLER_REQUIRE_SERVICES=1, as for conftest.require_service) they fail instead."""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml
from prometheus_client.parser import text_string_to_metric_families

from media_crawler_tests import services

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "alerts.yaml"
RUNBOOK = REPO / "docs" / "RECOVERY.md"  # the runbook: alerts point at its sections


def require_binary(name: str) -> str:
    """The binary's path; skip (fail under CI) when it is not installed."""
    return services.require_binary(name, "Debian package prometheus: .ci/install_prometheus.sh")


def promtool(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([require_binary("promtool"), *args], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def check_metrics(text: str) -> subprocess.CompletedProcess:
    """`promtool check metrics` (the lint a scrape must pass); exit 0 and no output when clean."""
    return promtool("check", "metrics", stdin=text)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrometheusServer:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expression: str) -> list[dict]:
        answer = urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expression})}",
                                        timeout=5)
        body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expression: str, timeout_s: float = 20.0) -> list[dict]:
        """The query's result once it is not empty (Prometheus scrapes every second)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                result = self.query(expression)
            except OSError:  # not listening yet
                result = []
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.25)


@contextmanager
def prometheus(targets: list[str], workdir: Path, scrape_interval: str = "1s") -> Iterator[PrometheusServer]:
    """A prometheus on 127.0.0.1 scraping `targets` (host:port) with a temporary config and
    data folder; stopped (SIGTERM, then SIGKILL) on the way out."""
    binary = require_binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "media_crawler", "static_configs": [{"targets": targets}]}],
    }))
    port = free_port()
    log = open(workdir / "prometheus.log", "w")
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        yield PrometheusServer(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = heading.strip().lstrip("#").strip().lower()
    kept = "".join(char for char in text if char.isalnum() or char in " -_")
    return kept.replace(" ", "-")


def runbook_anchors() -> set[str]:
    return {slug(line) for line in RUNBOOK.read_text().splitlines() if line.startswith("#")}


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
            if "alert" in rule]


def humanize_duration(value: float) -> str:
    """Prometheus' humanizeDuration template function (template/template.go), for seconds >= 1."""
    assert value >= 1, value
    whole = int(value)
    days, hours, minutes, seconds = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
    if days:
        return f"{days}d {hours}h {minutes}m {seconds}s"
    if hours:
        return f"{hours}h {minutes}m {seconds}s"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{value:.4g}s"


def humanize_1024(value: float) -> str:
    """Prometheus' humanize1024 template function, for values above 1."""
    prefix = ""
    for candidate in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(value) < 1024:
            break
        prefix, value = candidate, value / 1024
    return f"{value:.4g}{prefix}"


def render(annotations: dict[str, str], labels: dict[str, str], value: float | None = None) -> dict[str, str]:
    """The annotations as Prometheus renders them for an alert with `labels` and `value`:
    the templates deploy/alerts.yaml uses (`$labels.NAME`, `$value | humanizeDuration`,
    `$value | humanize1024`)."""
    import re

    functions = {"humanizeDuration": humanize_duration, "humanize1024": humanize_1024}

    def one(match: re.Match) -> str:
        expression = match.group(1).strip()
        if expression.startswith("$labels."):
            return labels[expression[len("$labels."):]]
        name, _, function = (part.strip() for part in expression.partition("|"))
        assert name == "$value" and function in functions and value is not None, expression
        return functions[function](value)

    rendered = {}
    for key, text in annotations.items():
        rendered[key] = re.sub(r"\{\{(.*?)\}\}", one, text)
    return rendered


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def recorded_series(scrapes: list[str], minutes_each: int, names: set[str]) -> list[dict]:
    """promtool input_series: each scrape's samples of `names` held for `minutes_each`
    minutes (one sample a minute), one phase after the other; '_' where a phase lacks one."""
    phases = [samples(text) for text in scrapes]
    keys = sorted({key for phase in phases for key in phase if key[0] in names})
    series = []
    for name, labels in keys:
        parts = []
        for phase in phases:
            value = phase.get((name, labels))
            parts.append(f"{value:g}x{minutes_each - 1}" if value is not None else f"_x{minutes_each - 1}")
        selector = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
        series.append({"series": selector, "values": " ".join(parts)})
    return series
