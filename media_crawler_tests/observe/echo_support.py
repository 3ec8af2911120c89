"""Helpers for test_echoed_secrets.py: the canaries, their encodings (computed here,
not by the scrubber under test), and a search of files, SQLite dumps and captured
output that reports each hit with its place and surroundings (the canary replaced
by <CANARY>, so a report never carries one)."""
from __future__ import annotations

import base64
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import yaml

from media_crawler_sim.sources import demo_sources
from media_crawler_tests.conftest import without_rate_waits
from urllib.parse import quote, quote_plus, unquote, unquote_plus, unquote_to_bytes

# Real-looking credentials whose encodings all differ: `%2C`, `,`, `/`, `+`, `=`, `*`.
SESSDATA = "c4nSESS8d21%2C1700000000%2Cb1l1+/x=*11"
FB_TOKEN = "EAAc4nTOK9f3e/+7a=%2Cfb=="
WEIBO_SUB = "_2Ac4nSUBk6q/+%2CzA=="
WEIBO_SUBP = "0033c4nSUBP7w+/q%3D1="
ENVIRONMENT = {
    "BILIBILI_SESSDATA": SESSDATA,
    "FB_ACCESS_TOKEN": FB_TOKEN,
    "WEIBO_COOKIE": f"SUB={WEIBO_SUB}; SUBP={WEIBO_SUBP}",
}
CANARIES = {"BILIBILI_SESSDATA": SESSDATA, "FB_ACCESS_TOKEN": FB_TOKEN, "WEIBO_COOKIE SUB": WEIBO_SUB,
            "WEIBO_COOKIE SUBP": WEIBO_SUBP}
SQLITE_MAGIC = b"SQLite format 3\x00"


def write_config(config_dir: Path, home: Path, base_url: str, sources: list[dict]) -> Path:
    """sources.yaml in `config_dir`, its store and ledger in `home`. The configuration is
    the user's input (here it holds a signed feed URL), so it lives outside the home
    whose every file the test searches. The platforms' request budgets are raised: what
    is searched for is the secrets, not the pace."""
    data = without_rate_waits(demo_sources(base_url))
    data.update(sources=sources, store=str(home / "store"), ledger_url=f"sqlite:///{home / 'ledger.db'}")
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def signed_feed(base_url: str) -> str:
    """The simulator's demo URL list behind a URL that carries the token and the session
    cookie: the way a plain URL list takes credentials along."""
    return f"{base_url}/urls/demo.json?access_token={quote(FB_TOKEN, safe='')}&sessdata={quote(SESSDATA, safe='')}"


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


def canary_encodings(value: str) -> dict[str, str]:
    """The four encodings of `value` (with their usual spellings), by name."""
    raw = value.encode()
    found = {
        "raw": value,
        "url-encoded": quote(value, safe=""),
        "url-encoded (/ kept)": quote(value),
        "url-encoded (form, +)": quote_plus(value, safe=""),
        "url-decoded": unquote(value),
        "url-decoded (form, +)": unquote_plus(value),
        "base64": base64.b64encode(raw).decode(),
        "base64 (unpadded)": base64.b64encode(raw).decode().rstrip("="),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
        "base64url (unpadded)": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }
    for name in ("url-encoded", "url-encoded (/ kept)", "url-encoded (form, +)"):
        found[name + " lower-case hex"] = _lower_hex(found[name])
    unique: dict[str, str] = {}
    for name, form in found.items():
        if form not in unique.values():
            unique[name] = form
    return unique


def all_forms() -> list[tuple[str, str, str]]:
    """(canary name, encoding name, form), longest form first (so a hit names the fullest form)."""
    rows = [(canary, encoding, form) for canary, value in CANARIES.items()
            for encoding, form in canary_encodings(value).items()]
    return sorted(rows, key=lambda row: -len(row[2]))


@dataclass(frozen=True)
class Leak:
    where: str  # file path / "path :: table" / "stdout of crawl"
    canary: str
    encoding: str
    snippet: str

    def __str__(self) -> str:
        return f"{self.where}: {self.canary} as {self.encoding}: ...{self.snippet}..."


def _masked(text: str) -> str:
    for _canary, _encoding, form in all_forms():
        text = text.replace(form, "<CANARY>")
    return text


def _search(data: bytes, needles: list[tuple[str, str, str]], where: str, context: int,
            decoded: str = "") -> list[Leak]:
    found: list[Leak] = []
    seen_at: set[int] = set()
    for canary, encoding, form in needles:
        needle = form.encode()
        start = 0
        while (at := data.find(needle, start)) >= 0:
            start = at + 1
            if any(abs(at - other) < len(needle) for other in seen_at):
                continue  # a shorter form inside a longer one already reported
            seen_at.add(at)
            around = data[max(0, at - context): at + len(needle) + context].decode("utf-8", "replace")
            snippet = _masked(around).replace("\n", "\\n").replace("\x00", "\\0")
            name = f"{decoded} (decodes to its {encoding} form)" if decoded else encoding
            found.append(Leak(where, canary, name, snippet))
    return found


def leaks_in_bytes(data: bytes, where: str, context: int = 90) -> list[Leak]:
    """Every canary form in `data`; then, with those masked, the raw, URL-decoded and
    base64 forms in `data` percent-decoded once (any other spelling of a URL-encoding:
    `,` kept, `%2c`, `+` for a space, a `%3D` inside a base64 ...)."""
    needles = all_forms()
    found = _search(data, needles, where, context)
    if b"%" not in data and b"+" not in data:
        return found
    masked = data
    for _canary, _encoding, form in needles:
        masked = masked.replace(form.encode(), b"<CANARY>")
    decodable = [row for row in needles if row[1] in ("raw", "url-decoded", "url-decoded (form, +)") or
                 row[1].startswith("base64")]
    found += _search(unquote_to_bytes(masked), decodable, where, context, "percent-encoded")
    found += _search(unquote_to_bytes(masked.replace(b"+", b" ")), [row for row in decodable if "base64" not in row[1]],
                     where, context, "form-encoded")
    return _unique(found)


def _unique(leaks: list[Leak]) -> list[Leak]:
    seen, unique = set(), []
    for leak in leaks:
        key = (leak.where, leak.canary, leak.snippet)
        if key not in seen:
            seen.add(key)
            unique.append(leak)
    return unique


def leaks_in_text(text: str, where: str) -> list[Leak]:
    return leaks_in_bytes(text.encode("utf-8", "surrogateescape"), where)


def sqlite_files(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as stream:
                if stream.read(16) == SQLITE_MAGIC:
                    found.append(path)
    return found


def sqlite_dump(path: Path) -> list[tuple[str, str]]:
    """(table, line) of `iterdump()`: every table, every row, every column (WAL included)."""
    rows = []
    with sqlite3.connect(path) as conn:
        for line in conn.iterdump():
            match = re.match(r'INSERT INTO "?([^"\s(]+)"?', line)
            rows.append((match.group(1) if match else "(schema)", line))
    return rows


def leaks_in_files(root: Path) -> list[Leak]:
    """Every file under `root` as bytes (databases, their WAL files, logs, blobs, yaml)."""
    found: list[Leak] = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            found += leaks_in_bytes(path.read_bytes(), str(path.relative_to(root)))
    return found


def leaks_in_databases(root: Path) -> list[Leak]:
    found: list[Leak] = []
    for path in sqlite_files(root):
        for table, line in sqlite_dump(path):
            found += leaks_in_text(line, f"{path.relative_to(root)} :: {table}")
    return found


def report(leaks: list[Leak], limit: int = 60) -> str:
    lines = [str(leak) for leak in leaks[:limit]]
    if len(leaks) > limit:
        lines.append(f"... and {len(leaks) - limit} more")
    return f"{len(leaks)} canary occurrence(s):\n" + "\n".join(lines)
