"""Test hooks under /_sim: the truth table, request stats and their reset.

- GET /_sim/truth: the seed, the days, the demo and fault sources, and every media
  file: `media` = the picks (what a complete default crawl of the demo sources must
  store, one entry per sha256), `alternates` = other files the demo answers link to
  (thumbnails, lower qualities, other codec, posters), `faults` = the fault feeds'
  entries with the failure each one plays.
- GET /_sim/truth/media?limit=N&cursor=C: the `media` entries a page at a time
  (limit <= 5000; follow `next_cursor` until null); GET /_sim/truth.ndjson: all of
  them streamed, one JSON line each. A generated world (media_crawler_sim/scale/) answers only these:
  its /_sim/truth is a header pointing at them.
- GET /_sim/sources?limit=N&cursor=C: sources.yaml entries, paged; GET
  /_sim/sources.yaml: a whole sources.yaml for every account, streamed.
- GET /_sim/stats (`?reset=1` to reset after reading), POST /_sim/stats/reset: resets
  the counters and the per-URL fault attempts (so "fails once" fails once again).
- POST /_sim/faults?platform=weibo&status=500: every media request of that platform
  answers 500 until POST /_sim/faults?platform=weibo&status=0; GET /_sim/faults lists them.
- POST /_sim/echo?on=1 (or 0): the hostile echo profile (media_crawler_sim/echo.py) on or off; GET
  /_sim/echo says whether it is on and how many answers echoed (never the values).
"""
from __future__ import annotations

from media_crawler_sim.echo import EchoProfile
from media_crawler_sim.exchange import Request, Response, json_response, not_found
from media_crawler_sim.faults import FaultBook
from media_crawler_sim.scale import truth as paged
from media_crawler_sim.stats import RequestStats
from media_crawler_sim.world import World


class ControlApi:
    prefix = "/_sim"

    def __init__(self, world: World, stats: RequestStats, fault_book: FaultBook, echo: EchoProfile | None = None) -> None:
        self.world, self.stats, self.fault_book = world, stats, fault_book
        self.echo = echo if echo is not None else EchoProfile()

    def handle(self, request: Request, subpath: str) -> Response:
        if subpath == "/truth" and request.method in ("GET", "HEAD"):
            return json_response(paged.truth(self.world, request.base_url, self.fault_book))
        if request.method in ("GET", "HEAD") and subpath in _PAGED:
            try:
                return _PAGED[subpath](self, request)
            except ValueError as error:
                return json_response({"error": str(error)}, status=400)
        if subpath == "/stats" and request.method in ("GET", "HEAD"):
            snapshot = self.stats.snapshot(per_path=request.param("per_path") != "0")
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

    def truth_media(self, request: Request) -> Response:
        limit = paged.clamp_limit(request.param("limit"))
        return json_response(paged.media_page(self.world, request.base_url, self.fault_book, request.param("cursor"), limit))

    def truth_stream(self, request: Request) -> Response:
        stream = paged.media_stream(self.world, request.base_url, self.fault_book)
        return Response(200, headers={"Content-Type": "application/x-ndjson"}, stream=stream)

    def sources(self, request: Request) -> Response:
        limit = paged.clamp_limit(request.param("limit"))
        return json_response(paged.sources_page(self.world, request.base_url, request.param("cursor"), limit))

    def sources_yaml(self, request: Request) -> Response:
        stream = (chunk.encode() for chunk in paged.sources_yaml(self.world, request.base_url))
        return Response(200, headers={"Content-Type": "application/yaml; charset=utf-8"}, stream=stream)

    def reset(self) -> None:
        self.stats.reset()
        self.fault_book.reset()
        self.echo.reset()  # the echo's "first request of a route" errors come again


_PAGED = {
    "/truth/media": ControlApi.truth_media,
    "/truth.ndjson": ControlApi.truth_stream,
    "/sources": ControlApi.sources,
    "/sources.yaml": ControlApi.sources_yaml,
}
