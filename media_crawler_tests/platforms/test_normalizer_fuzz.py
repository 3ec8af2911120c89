"""A seeded fuzz of every normalizer and of the URL-feed path.

The saved responses of each platform (fixtures/) are mutated 5,000 times per
platform by a seeded `random.Random`: keys deleted, types swapped, numbers
past every range (2**64, 1e400, NaN, Infinity), nesting hundreds and
hundreds of thousands deep, lone surrogates and NUL, empty and huge strings,
wrong containers, truncated text, duplicate keys, BOMs, invalid UTF-8. Each
mutation goes three ways:

- as a decoded object, through the platform's normalizer (normalize_cli's
  shape dispatch, which calls the same functions the adapters do);
- as text, through `normalize_text` (what `media-crawler normalize` runs on a file);
- as text, served to the real adapter by a fake transport (the crawl's own
  decode and normalize path; for URL feeds, the path `fetch-urls` takes).

Whatever comes out must be the project's classified errors: CrawlError raised,
ItemError yielded, never another exception; every record must fit the ledger
(items.check_record) and every text must encode as UTF-8.

A failure prints the seed, the platform, the fixture and the sample number:
`FUZZ_ONLY=<platform>:<sample>` reruns that one sample (`FUZZ_SEED` picks
another seed, `FUZZ_N` a shorter run). About 30 s for the four platforms.
"""
from __future__ import annotations

import functools
import io
import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, Callable

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import KINDS, DayWindow, ItemError, MediaRecord, Source
from media_crawler.platforms.registry import parse_source, spec_for
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.bilibili.client import BilibiliAdapter
from media_crawler.platforms.facebook import normalize as facebook
from media_crawler.platforms.facebook.client import FacebookAdapter
from media_crawler.platforms.facebook.usage import usage_from_headers
from media_crawler.platforms.items import check_record
from media_crawler.platforms.normalize_cli import Context, normalize_text
from media_crawler.platforms.urls.client import UrlsAdapter
from media_crawler.platforms.weibo import normalize as weibo
from media_crawler.platforms.weibo.client import WeiboAdapter

from .fakes import FIXTURES, CheckedTransport as FuzzTransport

SEED = int(os.environ.get("FUZZ_SEED", "20240611"))
MUTATIONS_PER_PLATFORM = int(os.environ.get("FUZZ_N", "5000"))
NOW = datetime(2019, 7, 15, 4, 0, tzinfo=timezone.utc)
ERROR_CLASSES = {error_class.value for error_class in ErrorClass}

# -- hostile values ----------------------------------------------------------------------

HUGE_INTS = [2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64, 10**30, -(10**30), 10**300, 2**31, -1]
FLOATS = [1e308, -1e308, 5e-324, float("nan"), float("inf"), float("-inf"), 0.5, -0.0, 1e16, 1.7976931348623157e308]
STRINGS = [
    "", " ", "\ud800", "a\udc00b", "\udfff", "\udbff\ud800", "\x00", "nul\x00byte", "\u202egnp.exe", "\u2028",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ☃ 中文", "\ufeff", "١٢٣٤", "²", "1e400", "-1e400", "NaN", "Infinity", "-1", "0", "00", "1_000",
    "99999999999999999999999999", "1" * 400, "9" * 5000, "x" * 5000, "http://[::1", "http://", "http:", "https://[",
    "//i0.hdslb.com/bfs/a.jpg", "http://i0.hdslb.com/bfs/a.jpg@100w", "javascript:alert(1)", "http://h/\ud800",
    "http://upos-sz-mirrorcos.bilivideo.com/upgcxcode/08/62/682610869/682610869_nb2-1-64.flv",
    "http://f.video.weibocdn.com/a.mp4?Expires=1&ssig=2", "http://wx1.sinaimg.cn/orj360/abc.gif",
    "https://video.xx.fbcdn.net/v.mp4?oh=1&oe=2", "/relative/path.jpg", "..\\..\\x", "\\\\host\\share", "%", "%zz",
    "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "Mon Jan 01 00:00:00 +0800 0001",
    "Fri Dec 31 23:59:59 -1000 9999", "99999999999天前", "5分钟前", "昨天 25:61", "13-45", "02-30", "刚刚",
    "2024-02-30", "true", "null", "{}", "[]", "livephoto", "video", "photo", "album", "gif",
]
CONTAINERS = [{}, [], {"0": "a", "1": "b"}, [None], [[]], {"": None}, {"data": []}, [{}], {"\ud800": 1}]
DELETE = object()

# Text-level replacements for a JSON value token.
NUMBER_TEXTS = [
    "1e400", "-1e400", "Infinity", "-Infinity", "NaN", str(2**64), str(2**63), str(-(2**63) - 1), "1" * 5000,
    "1e-400", "0e99999", "-0", "1.5e308", "123456789012345678901234567890", "1" * 4301,
]
STRING_TEXTS = [
    '"\\ud800"', '"\\udfff\\ud800"', '"a\\u0000b"', '"\\ud83d"', '"\\ud83d\\ude00"', '"\\uDBFF\\uDFFF"', '"\\x"',
    '"\\u12"', '""', '"\ud800"', '"\x00"', '"' + "é" * 3000 + '"',
]
_TOKEN = re.compile(r'-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|"(?:[^"\\]|\\.)*"')
DUPLICATE_KEYS = ['"code": 0, ', '"code": "x", ', '"ok": 1, ', '"ok": -100, ', '"data": [], ', '"data": null, ',
                  '"error": {"code": 368}, ', '"items": 5, ', '"id": {}, ', '"next": "http://[", ']


class Mutator:
    """Seeded mutations of decoded JSON (copying only the path it changes) and of JSON text."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- objects --------------------------------------------------------------------

    def mutate(self, obj: Any) -> Any:
        for _ in range(self.rng.choice((1, 1, 2, 3, 4))):
            obj = self._apply(obj, self._path(obj), self._change)
        return obj

    def hostile(self) -> Any:
        r = self.rng.random()
        if r < 0.35:
            return self.rng.choice(STRINGS)
        if r < 0.55:
            return self.rng.choice(HUGE_INTS)
        if r < 0.7:
            return self.rng.choice(FLOATS)
        if r < 0.8:
            return self.rng.choice([None, True, False, 0, 1])
        if r < 0.93:
            return self.rng.choice(CONTAINERS)
        return self.nest(self.rng.choice(STRINGS + HUGE_INTS), self.rng.choice((3, 40, 150)))

    def nest(self, value: Any, depth: int) -> Any:
        for _ in range(depth):
            value = [value] if self.rng.random() < 0.5 else {"data": value}
        return value

    def _path(self, obj: Any) -> list:
        """A random node, biased towards the depths where the media fields are:
        the walk goes on into containers more often than it stops at an envelope key."""
        path, node = [], obj
        while isinstance(node, (dict, list)) and node:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            deeper = [key for key in keys if isinstance(node[key], (dict, list)) and node[key]]
            if self.rng.random() < (0.02 if not path else 0.12 if deeper else 0.6):
                break
            key = self.rng.choice(deeper) if deeper and self.rng.random() < 0.7 else self.rng.choice(keys)
            path.append(key)
            node = node[key]
        return path

    def _apply(self, obj: Any, path: list, change: Callable[[Any], Any]) -> Any:
        if not path:
            new = change(obj)
            return None if new is DELETE else new
        key, rest = path[0], path[1:]
        copy = dict(obj) if isinstance(obj, dict) else list(obj)
        if rest:
            copy[key] = self._apply(obj[key], rest, change)
            return copy
        new = change(obj[key])
        if new is DELETE:
            del copy[key]
        else:
            copy[key] = new
        return copy

    def _change(self, value: Any) -> Any:
        r = self.rng.random()
        if r < 0.18:
            return DELETE
        if r < 0.45:
            return self.hostile()
        if r < 0.85:
            if isinstance(value, str):
                return self._string(value)
            if isinstance(value, bool) or value is None:
                return self.rng.choice([not value, "1", 1, [], {}])
            if isinstance(value, int):
                return self.rng.choice([str(value), -value, value + 2**64, value * 10**20, float(value) if
                                        abs(value) < 10**300 else 1e308, [value], {"v": value}, True])
            if isinstance(value, float):
                return self.rng.choice([str(value), -value, value * 1e300, int(value) if value == value and
                                        abs(value) < 1e300 else 2**64, [value], False])
            if isinstance(value, list):
                return self._list(value)
            if isinstance(value, dict):
                return self._dict(value)
        return self.rng.choice([[value], {"0": value}, self.nest(value, self.rng.choice((2, 60, 150)))])

    def _string(self, text: str) -> str:
        at = self.rng.randrange(len(text) + 1)
        return self.rng.choice([
            lambda: text[:at],
            lambda: text[:at] + self.rng.choice(("\ud800", "\udcff", "\x00", "\u2028", "\\", "%00")) + text[at:],
            lambda: text.replace("https://", "http://"),
            lambda: text.replace("https:", ""),
            lambda: text * (50 if len(text) < 200 else 2),
            lambda: text.upper(),
            lambda: f" {text}\n",
            lambda: self.rng.choice(STRINGS) + text,
            lambda: text + self.rng.choice(("@100w_100h.webp", "?a=1&token=t0ken-secret", "#x", ":9999", "/../..")),
        ])()

    def _list(self, items: list) -> Any:
        choice = self.rng.randrange(7)
        if choice == 0 and items:
            return items[:self.rng.randrange(len(items))] + items[self.rng.randrange(len(items)) + 1:]
        if choice == 1 and items and len(items) < 20:
            return items * self.rng.choice((2, 5, 20))
        if choice == 2:
            return list(reversed(items))
        if choice == 3:
            return items + [self.hostile()]
        if choice == 4:
            return {str(index): item for index, item in enumerate(items)}  # Weibo's {"0": a, "1": b}
        if choice == 5:
            return [self.hostile() for _ in items[:5]]
        return []

    def _dict(self, mapping: dict) -> Any:
        choice = self.rng.randrange(6)
        if choice == 0:
            return {**mapping, self.rng.choice(("", "\ud800", "type", "code", "id", "x" * 300)): self.hostile()}
        if choice == 1:
            return {}
        if choice == 2:
            return list(mapping.values())
        if choice == 3 and mapping:
            key = self.rng.choice(list(mapping))
            renamed = {k: v for k, v in mapping.items() if k != key}
            renamed[key.upper() if key != key.upper() else key + "_"] = mapping[key]
            return renamed
        if choice == 4 and mapping:
            return {key: self.hostile() for key in list(mapping)[:3]}
        return {**mapping, **{key: None for key in list(mapping)[:2]}}

    # -- text -----------------------------------------------------------------------

    def to_text(self, obj: Any) -> str:
        """JSON text of `obj`; NaN and infinities come out as the non-standard tokens."""
        return json.dumps(obj, ensure_ascii=self.rng.random() < 0.5)

    def mutate_text(self, text: str) -> str:
        for _ in range(self.rng.choice((1, 1, 2, 3))):
            text = self._text_change(text)
        return text

    def _text_change(self, text: str) -> str:
        choice = self.rng.randrange(9)
        at = self.rng.randrange(len(text) + 1)
        if choice <= 2:  # one value token becomes a hostile number, string or nesting
            match = _TOKEN.search(text, at) or _TOKEN.search(text)
            if not match:
                return text
            if choice == 0:
                token = self.rng.choice(NUMBER_TEXTS)
            elif choice == 1:
                token = self.rng.choice(STRING_TEXTS)
            else:
                depth = self.rng.choice((199, 201, 1000, 5000, 100_000))
                if self.rng.random() < 0.5:
                    token = "[" * depth + "1" + "]" * depth
                else:
                    token = '{"a":' * depth + "1" + "}" * depth
            return text[:match.start()] + token + text[match.end():]
        if choice == 3:
            return text[:at]  # truncated
        if choice == 4:  # a duplicate key: first (the answer's own value wins) or last (the injected one wins)
            key = self.rng.choice(DUPLICATE_KEYS)
            if self.rng.random() < 0.5:
                brace = text.find("{", at)
                brace = brace if brace >= 0 else text.find("{")
                return text if brace < 0 else text[:brace + 1] + key + text[brace + 1:]
            brace = text.find("}", at)
            brace = brace if brace >= 0 else text.rfind("}")
            return text if brace < 0 else text[:brace] + ", " + key.rstrip(", ") + text[brace:]
        if choice == 5:
            return self.rng.choice(("\ufeff", " \n\t", "")) + text + self.rng.choice(("", "x", "]", "\x00", "}{"))
        if choice == 6:  # raw garbage inside the text
            garbage = self.rng.choice(("\ud800", "\x00", "\u2028", "中", "\\", '"', "}", "]", ",", "\x7f"))
            return text[:at] + garbage + text[at:]
        if choice == 7:  # the whole answer nested deep
            depth = self.rng.choice((150, 1000, 50_000))
            return "[" * depth + text + "]" * depth
        return self.rng.choice(("", "null", "1e400", "NaN", "[]", "{}", '"text"', "<html>wall</html>", "[" * 300_000))

    def to_bytes(self, text: str) -> bytes:
        raw = text.encode("utf-8", "surrogatepass")
        at = self.rng.randrange(len(raw) + 1)
        return raw[:at] + self.rng.choice((b"\xff\xfe", b"\xc0\x80", b"\xed\xa0\x80", b"\x80", b"")) + raw[at:]


# -- a transport serving the mutated answer ----------------------------------------------

@functools.lru_cache(maxsize=None)
def fixture_text(platform: str, name: str) -> str:
    return (FIXTURES / platform / name).read_text(encoding="utf-8")


def fixture(platform: str, name: str) -> Any:
    return json.loads(fixture_text(platform, name))


STATUSES = [200] * 24 + [400, 401, 403, 404, 412, 418, 429, 432, 500, 503]

# -- per-platform adapter runs -----------------------------------------------------------

BILI_API = "http://127.0.0.1:9/bilibili"
BILI_ROUTES = {
    "nav": "/x/web-interface/nav", "arc": "/x/space/wbi/arc/search", "view": "/x/web-interface/view",
    "pagelist": "/x/player/pagelist", "playurl": "/x/player/wbi/playurl",
}
BILI_ENDPOINT = {
    "space_wbi_arc_search_ok.json": "arc", "view_ok.json": "view", "view_error_-404_deleted.json": "view",
    "view_error_62002_invisible.json": "view", "pagelist_multipage.json": "pagelist",
    "playurl_dash_fnval4048.json": "playurl", "playurl_mp4_durl.json": "playurl",
    "nav_wbi_keys_not_logged_in.json": "nav",
}


def run_bilibili(name: str, answer: Any, rng: random.Random) -> list:
    valid = {
        "nav": fixture_text("bilibili", "nav_wbi_keys_not_logged_in.json"),
        "arc": fixture_text("bilibili", "space_wbi_arc_search_ok.json"),
        "view": fixture_text("bilibili", "view_ok.json"),
        "pagelist": fixture_text("bilibili", "pagelist_multipage.json"),
        "playurl": fixture_text("bilibili", "playurl_dash_fnval4048.json"),
    }
    endpoint = BILI_ENDPOINT.get(name) or rng.choice(list(BILI_ROUTES))
    if endpoint == "pagelist":  # pagelist is asked only for a view without parts
        view = fixture("bilibili", "view_ok.json")
        view["data"].pop("pages"), view["data"].pop("cid")
        valid["view"] = json.dumps(view)
    routes = {BILI_ROUTES[key]: [text] for key, text in valid.items()}
    routes[BILI_ROUTES[endpoint]] = [answer, valid[endpoint]]
    adapter = BilibiliAdapter(PlatformSettings(api_base=BILI_API), FuzzTransport(routes))
    return crawl(adapter, parse_source("bilibili", "user 900408"), DayWindow(date(2025, 4, 22)))


WEIBO_M, WEIBO_AJAX = "http://127.0.0.1:9/weibo-m", "http://127.0.0.1:9/weibo"
WEIBO_SETUP = {  # fixture → (api, window)
    "getIndex_since_id_livephoto_video.json": ("mobile", date(2024, 3, 2)),
    "getIndex_cards_page2.json": ("mobile", date(2019, 7, 14)),
    "getIndex_error_ok0_no_content.json": ("mobile", date(2024, 3, 2)),
    "error_ok-100_login_required.json": ("mobile", date(2024, 3, 2)),
    "ajax_feed_statuses.json": ("ajax", date(2022, 3, 23)),
    "ajax_statuses_mymblog.json": ("ajax", date(2021, 2, 23)),
    "ajax_statuses_show_video_playback_list.json": ("show", date(2023, 11, 12)),
}


@functools.lru_cache(maxsize=None)
def weibo_detail() -> str:
    """m. statuses/show for a post of the feed: what the walk asks for an abridged entry."""
    return json.dumps({"ok": 1, "data": weibo.mblogs_from_getindex(
        fixture("weibo", "getIndex_since_id_livephoto_video.json"))[0]})


def run_weibo(name: str, answer: Any, rng: random.Random) -> list:
    api, day = WEIBO_SETUP.get(name, ("mobile", date(2024, 3, 2)))
    end = fixture_text("weibo", "getIndex_error_ok0_no_content.json")
    detail = weibo_detail()
    show = fixture_text("weibo", "ajax_statuses_show_video_playback_list.json")
    routes = {
        "/api/container/getIndex": [end], "/statuses/show": [detail], "/ajax/statuses/show": [show],
        "/ajax/statuses/longtext": ['{"ok": 1, "data": {"longTextContent": "long text"}}'],
        "/ajax/statuses/mymblog": ['{"ok": 1, "data": {"list": []}}'],
    }
    if api == "show":
        routes["/ajax/statuses/show"] = [answer, show]
    elif api == "ajax":
        routes["/ajax/statuses/mymblog"] = [answer, *routes["/ajax/statuses/mymblog"]]
    else:
        routes["/api/container/getIndex"] = [answer, end]
    if rng.random() < 0.2:  # the detail the walk asks for is the mutated one
        routes["/statuses/show"] = [answer, detail]
    settings = PlatformSettings(api_base=WEIBO_M, extra_api_bases={"ajax": WEIBO_AJAX})
    adapter = WeiboAdapter(settings, FuzzTransport(routes), now=lambda: NOW)
    if api == "show":
        found: list = []
        try:
            found += weibo.normalize_mblog(adapter.fetch_post("4968840566213069", "ajax"), NOW, 1080, "ajax")
        except CrawlError as error:
            found.append(error)
        return found + resolve_some(adapter, found)
    source = parse_source("weibo", "user 1669879400", {"api": api})
    return crawl(adapter, source, DayWindow(day))


FB_API = "http://127.0.0.1:9/facebook/v19.0"
FB_NODES = ("video_source_by_id.json", "video_object_fields.json")
FB_WINDOW = {
    "page_posts_attachments_video_photo.json": date(2024, 3, 1), "page_posts_paging_p1.json": date(2021, 7, 4),
    "post_attachments_album_subattachments.json": date(2020, 2, 18), "page_videos_p1.json": date(2021, 8, 10),
}


def run_facebook(name: str, answer: Any, rng: random.Random) -> list:
    posts = fixture("facebook", "page_posts_attachments_video_photo.json")
    posts["paging"]["next"] = posts["paging"]["next"].replace("https://graph.facebook.com/v21.0", FB_API)
    empty = '{"data": [], "paging": {}}'
    routes: dict[str, list] = {"/posts": [json.dumps(posts), empty]}
    found: list = []
    if name in FB_NODES:  # the posts edge lists the video without source: the walk asks its node
        del posts["data"][0]["attachments"]["data"][0]["media"]["source"]
        routes = {"/posts": [json.dumps(posts), empty], "/1885259812583763": [answer]}
    elif name == "post_attachments_album_subattachments.json":
        text = answer if isinstance(answer, str) else answer[1]
        routes["/posts"] = [(200 if isinstance(answer, str) else answer[0], '{"data": [' + text + "]}"), empty]
    else:
        routes["/posts"] = [answer, empty]
    if name == "rate_limit_headers_examples.json" and isinstance(answer, str):  # headers, not a body
        for header in ("x-app-usage", "x-business-use-case-usage", "x-ad-account-usage"):
            usage_from_headers({header: answer})
    adapter = FacebookAdapter(PlatformSettings(api_base=FB_API), FuzzTransport(routes, default=empty))
    window = DayWindow(FB_WINDOW.get(name, date(2024, 3, 1)))
    return found + crawl(adapter, parse_source("facebook", "page 528144077089525"), window)


URL_FEED = "http://127.0.0.1:9/urls/feed.json"
URL_FEEDS = {
    "feed_items.json": {"items": [
        {"url": "http://127.0.0.1:9/media/a.jpg", "sha256": "a" * 64, "size": 10, "extra": [1]},
        {"url": "/media/b.mp4?token=secret1&x=1", "size": "20", "title": "clip", "type": "video"},
        {"url": "http://127.0.0.1:9/media/c.bin", "type": "audio/mpeg", "published_at": "2026-11-26T10:00:00Z"},
        {"url": "media/d.webp", "published_at": 1795000000, "page_url": "http://127.0.0.1:9/p/1"},
        {"url": "http://127.0.0.1:9/media/e.m4s", "date": "2026-11-26", "kind": "video", "sha256": "B" * 64},
    ], "next": "page2.json"},
    "feed_list.json": [
        {"url": "http://127.0.0.1:9/media/x.png", "created_at": "1795000000"},
        {"url": "https://cdn.example.com/y.flac", "time": 1795000000.5, "size": 2**40},
    ],
    "feed_next_only.json": {"items": [], "next": "http://127.0.0.1:9/urls/feed.json?page=2"},
}


def run_urls(name: str, answer: Any, rng: random.Random) -> list:
    routes = {"/urls/feed.json": [answer, '{"items": []}']}
    adapter = UrlsAdapter(PlatformSettings(), FuzzTransport(routes, default='{"items": []}'))
    return crawl(adapter, parse_source("urls", URL_FEED), DayWindow(date(2026, 11, 26)))


def crawl(adapter, source: Source, window: DayWindow) -> list:
    """What the walk yields, then the CrawlError that ended it (if one did), then re-resolutions."""
    found: list = []
    try:
        for item in adapter.iter_records(source, window):
            found.append(item)
    except CrawlError as error:
        found.append(error)
    return found + resolve_some(adapter, found)


def resolve_some(adapter, found: list) -> list:
    resolved: list = []
    for record in [item for item in found if isinstance(item, MediaRecord)][:1]:
        try:
            resolved.append(adapter.resolve(record))
        except CrawlError as error:
            resolved.append(error)
    return resolved


ADAPTER_RUNS: dict[str, Callable[[str, Any, random.Random], list]] = {
    "bilibili": run_bilibili, "weibo": run_weibo, "facebook": run_facebook, "urls": run_urls,
}

# -- the corpus: each fixture, and each page cut down to single entries ------------------


def corpus(platform: str) -> list[tuple[str, Any]]:
    if platform == "urls":
        return list(URL_FEEDS.items())
    bodies = []
    for path in sorted((FIXTURES / platform).glob("*.json")):
        body = json.loads(path.read_text(encoding="utf-8"))
        bodies.append((path.name, body))
        # Small pages (one card, one post) mutate faster and reach deeper fields more often.
        cards = body.get("data", {}).get("cards") if isinstance(body, dict) and isinstance(body.get("data"), dict) else None
        for card in cards or []:
            bodies.append((path.name, {**body, "data": {**body["data"], "cards": [card]}}))
        listed = body.get("statuses") if isinstance(body, dict) else None
        for status in listed or []:
            bodies.append((path.name, {**body, "statuses": [status]}))
        posts = body.get("data") if isinstance(body, dict) and platform == "facebook" else None
        for post in posts if isinstance(posts, list) else []:
            bodies.append((path.name, {**body, "data": [post]}))
    return bodies


# -- the checks --------------------------------------------------------------------------


def utf8(text: Any) -> None:
    if text is not None:
        assert isinstance(text, str), text
        text.encode("utf-8")


def check_outcome(item: Any) -> None:
    """A yielded or raised outcome is one of the project's, and storable."""
    if isinstance(item, MediaRecord):
        check_record(item)
        assert item.kind in KINDS and item.media_url, item
    elif isinstance(item, ItemError):
        assert item.error_class in ERROR_CLASSES, item
        utf8(item.message), utf8(item.item_id), utf8(item.platform_code)
        assert item.platform_code is None or len(item.platform_code) <= 32, item
    elif isinstance(item, CrawlError):
        utf8(item.message), utf8(item.platform_code)
        assert item.platform_code is None or len(item.platform_code) <= 32, item.platform_code
        utf8(getattr(item, "raw_body", None))
        json.dumps(item.as_dict(), ensure_ascii=False).encode("utf-8")
    else:
        raise AssertionError(f"not a FeedItem or CrawlError: {item!r:.200}")


def run_object(platform: str, body: Any) -> None:
    """The decoded body through the platform's normalizer (normalize_cli's dispatch)."""
    notes: list[dict] = []
    try:
        items = list(spec_for(platform).load("normalize")(body, PlatformSettings(), NOW, notes.append, Context.of(platform, [body])))
    except CrawlError as error:
        items = [error]
    for item in items:
        check_outcome(item)
    json.dumps(notes, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if platform == "facebook" and isinstance(body, dict):  # the node normalizer the adapter calls directly
        for item in facebook.normalize_video_node(body) + facebook.normalize_post(body):
            check_outcome(item)


def run_text(platform: str, text: str | bytes) -> None:
    """The text as `media-crawler normalize` reads a file: nothing escapes, every line is JSON."""
    out, err = io.StringIO(), io.StringIO()
    status = normalize_text(platform, text, out, err, now=NOW)
    assert status in (0, 1)
    for line in filter(None, out.getvalue().split("\n") + err.getvalue().split("\n")):  # not splitlines: \u2028 is text
        line.encode("utf-8")
        parsed = json.loads(line)
        if "error_class" in parsed:
            assert parsed["error_class"] in ERROR_CLASSES, parsed


@dataclass
class Tally:
    samples: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def count(self, items: list) -> None:
        for item in items:
            name = type(item).__name__
            if isinstance(item, (CrawlError, ItemError)):
                name += f":{item.error_class.value if isinstance(item, CrawlError) else item.error_class}"
            self.outcomes[name] = self.outcomes.get(name, 0) + 1


@pytest.mark.parametrize("platform", ["bilibili", "weibo", "facebook", "urls"])
def test_fuzzed_answers_yield_only_classified_errors(platform, monkeypatch):
    monkeypatch.delenv("FB_ACCESS_TOKEN", raising=False)
    only = os.environ.get("FUZZ_ONLY", "")
    bodies = corpus(platform)
    tally = Tally()
    started = time.monotonic()
    for sample in range(MUTATIONS_PER_PLATFORM):
        if only and only != f"{platform}:{sample}":
            continue
        rng = random.Random(f"{SEED}:{platform}:{sample}")  # one per sample: FUZZ_ONLY replays it alone
        mutator = Mutator(rng)
        name, base = rng.choice(bodies)
        mutated = mutator.mutate(base)
        text = mutator.to_text(mutated)
        if rng.random() < 0.25:
            text = mutator.mutate_text(text)
        served: str | tuple = text
        try:
            run_object(platform, mutated)
            run_text(platform, mutator.to_bytes(text) if rng.random() < 0.1 else text)
            if rng.random() < 0.15:
                served = (rng.choice(STATUSES), text)
            found = ADAPTER_RUNS[platform](name, served, rng)
            for item in found:
                check_outcome(item)
            tally.count(found)
        except Exception as exc:
            raise AssertionError(
                f"seed {SEED}, {platform} sample {sample} ({name}): {type(exc).__name__}: {exc!s:.300}\n"
                f"rerun: FUZZ_SEED={SEED} FUZZ_ONLY={platform}:{sample}\ntext: {text[:600]!r}"
            ) from exc
        tally.samples += 1
    elapsed = time.monotonic() - started
    print(f"{platform}: {tally.samples} mutations in {elapsed:.1f}s; outcomes {sorted(tally.outcomes.items())}")
    if not only and "FUZZ_N" not in os.environ:  # FUZZ_N: a shorter run while debugging
        assert tally.samples >= 5000
        # The fuzz must reach past the decoder: records and per-item errors, not only refusals.
        assert tally.outcomes.get("MediaRecord", 0) > 500
        assert any(name.startswith("ItemError:") for name in tally.outcomes)
        assert any(name.startswith("CrawlError:parse_error") for name in tally.outcomes)
