"""The simulator as a function from Request to Response: one World, the CDN rules,
the fault book, the stats, and a prefix router over the platform APIs."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from media_crawler_sim.api import Api
from media_crawler_sim.api.control import ControlApi
from media_crawler_sim.api.media import MediaFiles
from media_crawler_sim.cdn import DEFAULT_URL_LIFETIME_S, CdnRules
from media_crawler_sim.echo import EchoProfile
from media_crawler_sim.exchange import Request, Response, json_response, not_found
from media_crawler_sim.stats import RequestStats
from media_crawler_sim.parts import simulator_parts
from media_crawler_sim.world import World


@dataclass(frozen=True)
class Behaviour:
    """How the simulator answers, whatever world it serves.

    url_lifetime_s: how long a signed media URL stays valid; clock (unix seconds,
    default time.time) drives signing and expiry: tests pass a fixed one to get
    byte-identical answers or to jump past a URL's lifetime.
    fault_rate: the share of media requests answered 503 at random (the fault
    sources' planned faults come regardless).
    media_latency_ms: a delay before every media answer.
    api_latency_ms: a delay before every platform API answer (feed pages, play
    URLs, keys), as a real platform takes 100-300 ms to answer one.
    echo_secrets: the hostile profile that sends credentials back (media_crawler_sim/echo.py).
    """

    url_lifetime_s: float = DEFAULT_URL_LIFETIME_S
    fault_rate: float = 0.0
    media_latency_ms: float = 0.0
    api_latency_ms: float = 0.0
    clock: Callable[[], float] | None = None
    echo_secrets: bool = False

    def __post_init__(self) -> None:
        for name in ("media_latency_ms", "api_latency_ms"):
            value = getattr(self, name)
            if not 0.0 <= value <= 60_000.0:
                raise ValueError(f"{name.replace('_', '-')} must be between 0 and 60000 ms, not {value:g}")


class SimulatorApp:
    def __init__(self, world: World, behaviour: Behaviour = Behaviour()) -> None:
        self.world = world
        self.echo = EchoProfile(behaviour.echo_secrets)  # the hostile profile (echo.py), off by default
        self.base_url = "http://127.0.0.1"  # the server sets the real one once bound
        self.cdn = CdnRules(world.seeded.secret("cdn"), behaviour.url_lifetime_s, behaviour.clock or time.time)
        self.fault_book = world.fault_book(behaviour.fault_rate)
        self.api_latency_s = behaviour.api_latency_ms / 1000.0
        self.stats = RequestStats()
        # Every registered platform's routes (its simulator part, media_crawler_sim/parts.py), in
        # registry order; a generated world (media_crawler_sim/scale/) only mounts parts that serve one.
        platform_apis = tuple(api for part in simulator_parts().values()
                              if part.generated or not world.is_generated for api in part.apis(world, self.cdn))
        self.platform_prefixes = frozenset(api.prefix for api in platform_apis)
        self.apis: tuple[Api, ...] = (
            *platform_apis,
            MediaFiles(world, self.cdn, self.fault_book, behaviour.media_latency_ms),
            ControlApi(world, self.stats, self.fault_book, self.echo),
        )

    def dispatch(self, request: Request) -> Response:
        raw = request
        if self.echo.enabled:
            request = self.echo.clean(request)  # the echoes it sent earlier, taken out again
        for api in self.apis:
            # "/weibo-m/..." must not match "/weibo": compare whole path segments.
            if request.path == api.prefix or request.path.startswith(api.prefix + "/"):
                if self.api_latency_s and api.prefix in self.platform_prefixes:
                    time.sleep(self.api_latency_s)
                # Every platform's routes echo; the media CDN only in headers, /_sim never.
                if self.echo.enabled and api.prefix in self.platform_prefixes:
                    return self.echo.answer(raw, api.prefix, _subpath_handler(api))
                if self.echo.enabled and api.prefix == MediaFiles.prefix:
                    return self.echo.media_answer(raw, _subpath_handler(api))
                return api.handle(request, request.path[len(api.prefix) :])
        if request.path == "/" and self.world.is_generated:
            return json_response({
                "simulator": "media-crawler",
                "seed": self.world.seed,
                "size": self.world.size.as_json(),
                "sources": request.base_url + "/_sim/sources?limit=500",
                "sources_yaml": request.base_url + "/_sim/sources.yaml",
                "truth": request.base_url + "/_sim/truth",
            })
        if request.path == "/":
            return json_response({
                "simulator": "media-crawler",
                "seed": self.world.seed,
                "sources": [source.as_json(request.base_url) for source in self.world.demo_sources],
                "truth": request.base_url + "/_sim/truth",
            })
        return not_found(request.path)


def _subpath_handler(api: Api) -> Callable[[Request], Response]:
    return lambda request: api.handle(request, request.path[len(api.prefix) :])
