"""Facebook Graph API under /facebook/v<major>.<minor>: `/{page-id}/posts` and the
`/{video-id}` node (a fresh signed `source` on every call).

- `access_token` is required (any non-empty value); missing -> error 190 with HTTP
  400; the value `expired` -> 190/463 "Session has expired" (for auth-error tests).
- `fields` is honoured at the top level (only listed fields, plus id, come back; the
  default is id, created_time, message); `attachments` always comes whole.
- `since`/`until` (unix seconds, both inclusive) filter posts; `limit` defaults to
  DEFAULT_LIMIT, small on purpose so the demo pages actually page (the real default is 25).
- Page 42 pages with cursors: `paging{cursors{before,after}, next, previous}`;
  page 43 with time: `paging{previous, next}` carrying since/until/__paging_token.
  `next` is absent on the last page.
- Unknown ids answer error 100 subcode 33 (deleted or private), HTTP 400.
"""
from __future__ import annotations

import base64
import re
from urllib.parse import urlencode

from media_crawler_sim.api.facebook_posts import post_json
from media_crawler_sim.cdn import CdnRules
from media_crawler_sim.content.facebook import Page, Post, Video
from media_crawler_sim.exchange import Request, Response, json_response
from media_crawler_sim.world import World

DEFAULT_LIMIT, MAX_LIMIT = 4, 100
DEFAULT_POST_FIELDS = ("id", "created_time", "message")
_VERSION = re.compile(r"^v\d+\.\d+$")
_USAGE_HEADERS = {"x-app-usage": '{"call_count":1,"total_cputime":1,"total_time":1}'}
# Replaced, not copied, when building next/previous links.
_PAGING_PARAMS = {"after", "before", "since", "until", "limit", "__paging_token", "__previous"}


def graph_error(status: int, code: int, message: str, kind: str = "OAuthException", subcode: int | None = None) -> Response:
    error = {"message": message, "type": kind, "code": code, "fbtrace_id": "SimFbTrace0001"}
    if subcode is not None:
        error["error_subcode"] = subcode
    return json_response({"error": error}, status=status, headers=_USAGE_HEADERS)


def requested_fields(spec: str | None, default: tuple[str, ...]) -> set[str]:
    """Top-level names of a Graph `fields` spec: `id,attachments{media,target},message`."""
    if not spec:
        return set(default) | {"id"}
    names, depth, current = set(), 0, ""
    for char in spec + ",":
        if char in "{(":
            depth += 1
        elif char in "})":
            depth -= 1
        elif char == "," and depth == 0:
            names.add(current.strip().split(".")[0])
            current = ""
        elif depth == 0:
            current += char
    return (names - {""}) | {"id"}


def _cursor(post: Post) -> str:
    return base64.urlsafe_b64encode(f"sim-cursor:{post.id}".encode()).decode().rstrip("=")


def _cursor_post_id(cursor: str) -> str:
    text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    if not text.startswith("sim-cursor:"):
        raise ValueError(cursor)
    return text.removeprefix("sim-cursor:")


class FacebookApi:
    prefix = "/facebook"

    def __init__(self, world: World, cdn: CdnRules) -> None:
        self.world, self.cdn = world, cdn

    def handle(self, request: Request, subpath: str) -> Response:
        parts = subpath.strip("/").split("/")
        if len(parts) < 2 or not _VERSION.match(parts[0]):
            return graph_error(400, 100, "Unknown path components", "OAuthException")
        token = request.param("access_token")
        if not token:
            return graph_error(400, 190, "An access token is required to request this resource.")
        if token == "expired":
            return graph_error(400, 190, "Error validating access token: Session has expired.", subcode=463)
        try:
            if len(parts) == 3 and parts[2] in ("posts", "feed", "published_posts") and parts[1] in self.world.facebook_pages:
                return self.posts(request, parts[0], self.world.facebook_pages[parts[1]])
            if len(parts) == 2 and parts[1] in self.world.facebook_videos:
                return self.video(request, self.world.facebook_videos[parts[1]])
            if len(parts) == 2 and self._post(parts[1]) is not None:
                # A single post node: what a client re-reads to refresh expired photo URLs.
                fields = requested_fields(request.param("fields"), DEFAULT_POST_FIELDS)
                return json_response(post_json(self._post(parts[1]), fields, request.base_url, self.cdn),
                                     headers=_USAGE_HEADERS)
            if len(parts) == 2 and parts[1] in self.world.facebook_pages:
                page = self.world.facebook_pages[parts[1]]
                return json_response({"id": page.page_id, "name": page.name}, headers=_USAGE_HEADERS)
        except ValueError:
            return graph_error(400, 100, "Invalid parameter", "OAuthException")
        object_id = parts[1]
        return graph_error(
            400, 100, f"Unsupported get request. Object with ID '{object_id}' does not exist, cannot be loaded due to "
            "missing permissions, or does not support this operation.", "GraphMethodException", subcode=33,
        )

    def _post(self, post_id: str) -> Post | None:
        return self.world.facebook_post(post_id)

    def posts(self, request: Request, version: str, page: Page) -> Response:
        since, until = request.int_param("since"), request.int_param("until")
        limit = min(MAX_LIMIT, max(1, request.int_param("limit", DEFAULT_LIMIT)))
        # page.posts is newest first (lazy in a generated world): bisect the window, never copy the feed.
        first = 0 if until is None else _first_index(page.posts, lambda post: post.created.timestamp() <= until)
        end = len(page.posts) if since is None else _first_index(page.posts, lambda post: post.created.timestamp() < since)
        posts = _Window(page.posts, first, max(first, end))
        fields = requested_fields(request.param("fields"), DEFAULT_POST_FIELDS)
        if page.paging == "cursor":
            listed, paging = self._cursor_page(request, version, page, posts, limit)
        else:
            listed, paging = self._time_page(request, version, page, posts, limit, since)
        data = [post_json(post, fields, request.base_url, self.cdn) for post in listed]
        body = {"data": data, "paging": paging} if paging else {"data": data}
        return json_response(body, headers=_USAGE_HEADERS)

    def _link(self, request: Request, version: str, page: Page, **changes: str | int) -> str:
        kept = [(key, value) for key, value in request.pairs if key not in _PAGING_PARAMS]
        query = urlencode(kept + [(key, str(value)) for key, value in changes.items()])
        return f"{request.base_url}{self.prefix}/{version}/{page.page_id}/posts?{query}"

    def _cursor_page(self, request: Request, version: str, page: Page, posts: "_Window", limit: int) -> tuple[list[Post], dict]:
        after, before = request.param("after"), request.param("before")
        if after:
            start = self._position(posts, _cursor_post_id(after)) + 1
        elif before:
            start = max(0, self._position(posts, _cursor_post_id(before)) - limit)
        else:
            start = 0
        listed = posts[start : start + limit]
        if not listed:
            return [], {}
        paging: dict = {"cursors": {"before": _cursor(listed[0]), "after": _cursor(listed[-1])}}
        if start + limit < len(posts):
            paging["next"] = self._link(request, version, page, limit=limit, after=_cursor(listed[-1]))
        if start > 0:
            paging["previous"] = self._link(request, version, page, limit=limit, before=_cursor(listed[0]))
        return listed, paging

    def _position(self, posts: "_Window", post_id: str) -> int:
        """Where the post is in the window (ValueError if it is not): found by its time, then by id."""
        post = self._post(post_id)
        if post is None:
            raise ValueError(post_id)
        moment = post.created.timestamp()
        index = _first_index(posts, lambda listed: listed.created.timestamp() <= moment)
        while index < len(posts) and posts[index].created.timestamp() == moment:
            if posts[index].id == post_id:
                return index
            index += 1
        raise ValueError(post_id)

    def _time_page(
        self, request: Request, version: str, page: Page, posts: "_Window", limit: int, since: int | None
    ) -> tuple[list[Post], dict]:
        listed = posts[:limit]
        if not listed:
            return [], {}
        newest, oldest = int(listed[0].created.timestamp()), int(listed[-1].created.timestamp())
        token = base64.urlsafe_b64encode(f"{page.page_id}:{oldest}".encode()).decode().rstrip("=")
        # Dunder keys go through dicts: as keyword names inside a class they would be mangled.
        newer = {"since": newest + 1, "__paging_token": token, "__previous": 1}
        paging = {"previous": self._link(request, version, page, limit=limit, **newer)}
        if len(posts) > limit:
            older = {"until": oldest - 1, **({"since": since} if since is not None else {}), "__paging_token": token}
            paging["next"] = self._link(request, version, page, limit=limit, **older)
        return listed, paging

    def video(self, request: Request, video: Video) -> Response:
        poster = self.cdn.url(request.base_url, video.poster.file)
        page_id = video.file.post.split("_")[0]
        node = {
            "id": video.target_id, "source": self.cdn.url(request.base_url, video.file), "picture": poster,
            "length": video.length, "created_time": video.created.strftime("%Y-%m-%dT%H:%M:%S+0000"),
            "updated_time": video.created.strftime("%Y-%m-%dT%H:%M:%S+0000"),
            "permalink_url": f"/{page_id}/videos/{video.target_id}/", "title": f"sim video {video.target_id}",
            "description": "", "status": {"video_status": "ready", "processing_progress": 100},
            "format": [
                {"embed_html": "", "filter": "130x130", "height": 130, "width": 130, "picture": poster},
                {"embed_html": "", "filter": "native", "height": video.file.recipe.height, "width": video.file.recipe.width,
                 "picture": poster},
            ],
        }
        fields = requested_fields(request.param("fields"), ("id", "created_time", "description"))
        return json_response({key: value for key, value in node.items() if key in fields}, headers=_USAGE_HEADERS)


def _first_index(posts, reached) -> int:
    """The first index where `reached(post)` holds, for a predicate that stays true once true."""
    low, high = 0, len(posts)
    while low < high:
        middle = (low + high) // 2
        if reached(posts[middle]):
            high = middle
        else:
            low = middle + 1
    return low


class _Window:
    """posts[first:end] without copying: len, indexing and slicing (a list)."""

    def __init__(self, posts, first: int, end: int) -> None:
        self.posts, self.first, self.end = posts, first, end

    def __len__(self) -> int:
        return self.end - self.first

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            return list(self.posts[self.first + start : self.first + stop : step])
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.posts[self.first + index]
