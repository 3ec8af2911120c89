"""Route handlers: each answers the real API paths of one platform under its prefix
(DESIGN.md's simulator table), building responses in the platforms' real shapes from
the World. Media bytes are served by `media.MediaFiles`, the test hooks by `control`."""
from __future__ import annotations

from typing import Protocol

from media_crawler_sim.exchange import Request, Response


class Api(Protocol):
    prefix: str  # "/bilibili": the handler sees paths below it

    def handle(self, request: Request, subpath: str) -> Response: ...
