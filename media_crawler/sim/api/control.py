"""Test hooks under /_sim: the truth table, request stats and their reset.

- GET /_sim/truth: the seed, the days, the demo and fault sources, and every media
  file: `media` = the picks (what a complete default crawl of the demo sources must
  store, one entry per sha256), `alternates` = other files the demo answers link to
  (thumbnails, lower qualities, other codec, posters), `faults` = the fault feeds'
  entries with the failure each one plays.
- GET /_sim/stats (`?reset=1` to reset after reading), POST /_sim/stats/reset: resets
  the counters and the per-URL fault attempts (so "fails once" fails once again).
- POST /_sim/faults?platform=weibo&status=500: every media request of that platform
  answers 500 until POST /_sim/faults?platform=weibo&status=0; GET /_sim/faults lists them.
- POST /_sim/echo?on=1 (or 0): the hostile echo profile (sim/echo.py) on or off; GET
  /_sim/echo says whether it is on and how many answers echoed (never the values).
"""
from __future__ import annotations

from media_crawler.sim.catalog import ALTERNATE, FAULT, PICK, MediaFile
from media_crawler.sim.echo import EchoProfile
from media_crawler.sim.exchange import Request, Response, json_response, not_found
from media_crawler.sim.faults import FaultBook
from media_crawler.sim.stats import RequestStats
from media_crawler.sim.world import DEMO_SOURCES, FAULT_SOURCES, World


class ControlApi:
    prefix = "/_sim"

    def __init__(self, world: World, stats: RequestStats, fault_book: FaultBook, echo: EchoProfile | None = None) -> None:
        self.world, self.stats, self.fault_book = world, stats, fault_book
        self.echo = echo if echo is not None else EchoProfile()

    def handle(self, request: Request, subpath: str) -> Response:
        if subpath == "/truth" and request.method in ("GET", "HEAD"):
            return json_response(truth(self.world, request.base_url, self.fault_book))
        if subpath == "/stats" and request.method in ("GET", "HEAD"):
            snapshot = self.stats.snapshot()
            if request.param("reset") == "1":
                self.reset()
            return json_response(snapshot)
        if subpath == "/faults" and request.method == "POST":
            platform, status = request.param("platform"), request.param("status") or "0"
            if not platform or not status.isdigit():
                return json_response({"error": "want ?platform=NAME&status=CODE (0 clears)"}, status=400)
            self.fault_book.set_outage(platform, int(status))
            return json_response({"outages": self.fault_book.outages()})
        if subpath == "/faults" and request.method in ("GET", "HEAD"):
            return json_response({"outages": self.fault_book.outages()})
        if subpath == "/echo" and request.method == "POST":
            on = request.param("on")
            if on not in ("0", "1"):
                return json_response({"error": "want ?on=1 or ?on=0"}, status=400)
            self.echo.enabled = on == "1"
            return json_response(self.echo.status())
        if subpath == "/echo" and request.method in ("GET", "HEAD"):
            return json_response(self.echo.status())
        if subpath == "/stats/reset" and request.method == "POST":
            self.reset()
            return json_response({"reset": True})
        return not_found(request.path)

    def reset(self) -> None:
        self.stats.reset()
        self.fault_book.reset()
        self.echo.reset()  # the echo's "first request of a route" errors come again


def truth(world: World, base_url: str, fault_book: FaultBook) -> dict:
    catalog = world.catalog
    picks, seen = [], set()
    for file in catalog.files(PICK):
        entry = _entry(world, file, base_url)
        if entry["sha256"] not in seen:  # dedup by content, like the blob store
            seen.add(entry["sha256"])
            picks.append(entry)
    alternates = [_entry(world, file, base_url) for file in catalog.files(ALTERNATE)]
    fault_entries = [
        {**_entry(world, file, base_url), "fault": fault_book.planned(file.path)}
        for file in catalog.files(FAULT)
    ]
    return {
        "seed": world.seed,
        "base_url": base_url,
        "days": [day.isoformat() for day in world.days],
        "sources": [source.as_json(base_url) for source in DEMO_SOURCES],
        "fault_sources": [source.as_json(base_url) for source in FAULT_SOURCES],
        "wbi": {"img_key": world.wbi_img_key, "sub_key": world.wbi_sub_key},
        "media": picks,
        "alternates": [entry for entry in alternates if entry["sha256"] not in seen],
        "faults": fault_entries,
    }


def _entry(world: World, file: MediaFile, base_url: str) -> dict:
    data = world.catalog.content(file)
    sha256 = world.catalog.sha256(file)
    source = file.source.replace("urls: /", f"urls: {base_url}/")
    return {
        "platform": file.platform,
        "source": source,
        "path": file.path,
        "sha256": sha256,
        "size": len(data),
        "kind": file.kind,
        "mime": file.mime,
        "day": file.day.isoformat() if file.day else None,
        "post": file.post,
        "item": file.item or sha256,  # URL-list files are known by their content
        "variant": file.variant,
    }
