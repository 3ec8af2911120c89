"""URL-list feeds under /urls: `demo.json`, `html.json`, `errors.json`, each
`{"items":[{"url","sha256","size"}]}` with URLs on this simulator."""
from __future__ import annotations

from media_crawler.sim.exchange import Request, Response, json_response, not_found
from media_crawler.sim.world import World


class UrlFeedsApi:
    prefix = "/urls"

    def __init__(self, world: World) -> None:
        self.world = world

    def handle(self, request: Request, subpath: str) -> Response:
        feed = self.world.url_feeds.get(subpath.strip("/").removesuffix(".json"))
        if feed is None or not subpath.endswith(".json"):
            return not_found(request.path)
        catalog = self.world.catalog
        items = [
            {
                "url": request.base_url + item.file.path,
                "sha256": catalog.sha256(item.file),
                "size": len(catalog.content(item.file)),
            }
            for item in feed.items
        ]
        return json_response({"items": items})
