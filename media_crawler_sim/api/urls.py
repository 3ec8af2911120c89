"""URL-list feeds under /urls: `demo.json`, `html.json`, `errors.json`, each
`{"items":[{"url","sha256","size"}]}` with URLs on this simulator. A generated world's
`list-N.json` feeds also date their items (`published_at`) and page (`?page=`, `next`)."""
from __future__ import annotations

from media_crawler_sim.exchange import Request, Response, json_response, not_found
from media_crawler_sim.world import World


class UrlFeedsApi:
    prefix = "/urls"

    def __init__(self, world: World) -> None:
        self.world = world

    def handle(self, request: Request, subpath: str) -> Response:
        feed = self.world.url_feeds.get(subpath.strip("/").removesuffix(".json"))
        if feed is None or not subpath.endswith(".json"):
            return not_found(request.path)
        catalog = self.world.catalog
        page_size = self.world.page_sizes.get("urls")
        listed, next_page = feed.items, None
        if page_size is not None:  # generated worlds: `?page=N` pages with a `next` link
            asked = request.param("page") or "1"
            page = max(1, int(asked)) if asked.isdigit() else 1
            listed = feed.items[(page - 1) * page_size : page * page_size]
            if page * page_size < len(feed.items):
                next_page = f"{request.base_url}{feed.path}?page={page + 1}"
        items = []
        for item in listed:
            entry = {
                "url": request.base_url + item.file.path,
                "sha256": catalog.sha256(item.file),
                "size": len(catalog.content(item.file)),
            }
            if item.published is not None:
                entry["published_at"] = item.published.strftime("%Y-%m-%dT%H:%M:%SZ")
            items.append(entry)
        body = {"items": items}
        if next_page:
            body["next"] = next_page
        return json_response(body)
