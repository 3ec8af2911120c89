"""The Facebook adapter: a page's posts (or, with `edge: videos`, its videos)
through the Graph API, limited to the window with `since`/`until`, following
`paging.next`. A video listed without `source` is completed from its own node.

The access token comes from the environment on every request. `paging.next`
URLs from the real Graph API embed the token: they are taken apart, the
embedded token dropped, and re-sent through the transport with ours, and only
to the configured api_base, so the token never leaves for another host and
never sits in a URL we might log.
"""
from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import Any, Iterator, Mapping
from urllib.parse import parse_qsl, urlsplit

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, ItemError, MediaRecord, Source
from media_crawler.platforms.base import CursorStore, FeedItem, PlatformAdapter
from media_crawler.platforms.facebook import normalize
from media_crawler.platforms.facebook.errors import PLATFORM, decode_response
from media_crawler.platforms.fields import as_list, as_str
from media_crawler.platforms.headers import BROWSER_USER_AGENT, credential
from media_crawler.platforms.items import MALFORMED, check_record, item_failure
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.window import NewestSeen, max_pages, page_reaches_before
from media_crawler.scrub import excerpt

PAGE_SIZE = 25
TOKEN_PARAM = "access_token"
_VERSION = re.compile(r"v\d+(\.\d+)?")
log = logging.getLogger("media_crawler.platforms.facebook")


class FacebookAdapter(PlatformAdapter):
    name = "facebook"
    default_api_base = "https://graph.facebook.com/v19.0"
    url_lifetime_s = 3600.0

    # -- the feed -------------------------------------------------------------------

    def iter_records(
        self, source: Source, window: DayWindow, cursors: CursorStore | None = None
    ) -> Iterator[FeedItem]:
        newest = NewestSeen(cursors, source.key)
        edge = source.options.get("edge", "posts")
        url = f"{self.api_base}/{source.ident}/{edge}"
        entry_items = self._video_entry_items if edge == "videos" else self._post_items
        params: dict[str, Any] = {
            "fields": normalize.VIDEO_EDGE_FIELDS if edge == "videos" else normalize.POST_FIELDS,
            "since": int(window.start.timestamp()),
            "until": int(window.end.timestamp()),
            "limit": PAGE_SIZE,
        }
        requested: set[tuple] = set()
        for _ in range(max_pages(self.settings)):
            requested.add((url, tuple(sorted(params.items()))))
            body = self._get(url, params)
            posts = [post for post in as_list(body.get("data")) if isinstance(post, Mapping)]
            for post in posts:
                published_at = normalize.post_published_at(post)
                newest.observe(published_at)
                # since/until already filter; checked again for servers that ignore them.
                if window.contains(published_at):
                    yield from entry_items(post)
            next_url = normalize.next_page_url(body)
            if not posts or not next_url or page_reaches_before(window, map(normalize.post_published_at, posts)):
                break
            url, params = self.follow(next_url)
            if (url, tuple(sorted(params.items()))) in requested:  # a server echoing the same cursor
                break
        newest.save()

    def _post_items(self, post: Mapping[str, Any]) -> Iterator[FeedItem]:
        """The post's records; a video the edge listed without `source` is
        completed from its own node rather than dropped."""
        without_source = set(normalize.videos_missing_source(post))
        for item in normalize.normalize_post(post):
            if isinstance(item, ItemError) and item.item_id in without_source:
                yield from self._video_from_node(item.item_id, post)
            else:
                yield item

    def _video_from_node(self, video_id: str, post: Mapping[str, Any]) -> Iterator[FeedItem]:
        try:
            record = normalize.video_node_record(self.video_node(video_id), video_id)
            post_meta = {"post_id": as_str(post.get("id")), "post_url": normalize.site_url(post.get("permalink_url"))}
            record = check_record(replace(record, published_at=normalize.post_published_at(post),
                                          meta={**record.meta, **{k: v for k, v in post_meta.items() if v}}))
        except (CrawlError, *MALFORMED) as exc:
            yield item_failure(PLATFORM, video_id, exc)
            return
        yield record

    def _video_entry_items(self, entry: Mapping[str, Any]) -> Iterator[FeedItem]:
        """A /videos entry's record; one listed without `source` is completed from its
        node. A node that has none either (Graph signs no source for this token) is a
        logged note, not a parse_error: the answer is as documented, the video not ours to fetch."""
        video_id = normalize.video_entry_missing_source(entry)
        if video_id is None:
            yield from normalize.normalize_video_node(entry)
            return
        try:
            node = self.video_node(video_id)
        except CrawlError as exc:
            yield item_failure(PLATFORM, video_id, exc)
            return
        if not as_str(node.get("source")):
            log.warning("facebook video %s: neither the /videos edge nor its node gives a source; "
                        "the token may lack the permission to read it", video_id)
            return
        yield from normalize.normalize_video_node({**entry, **{k: v for k, v in node.items() if v not in (None, "")}})

    # -- API calls --------------------------------------------------------------------

    def video_node(self, video_id: str) -> Mapping[str, Any]:
        return self._get(self._object_url(video_id), {"fields": normalize.VIDEO_FIELDS})

    def _object_url(self, object_id: str) -> str:
        if not normalize.is_graph_id(object_id):
            raise parse_error(PLATFORM, f"{excerpt(repr(object_id), 80)} is not a Graph object id")
        return f"{self.api_base}/{object_id}"

    def follow(self, next_url: str) -> tuple[str, dict[str, str]]:
        """`paging.next` as (url, params): treated as opaque except that the
        embedded token is dropped and the URL is rebased onto api_base."""
        try:
            parts = urlsplit(next_url)
        except ValueError:  # a malformed host (`https://[`): not a link we can follow
            raise parse_error(PLATFORM, "paging.next is not a URL") from None
        params = {k: v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != TOKEN_PARAM}
        path = parts.path
        base = urlsplit(self.api_base)
        if (parts.scheme, parts.netloc) == (base.scheme, base.netloc) and path.startswith(base.path):
            return f"{base.scheme}://{base.netloc}{path}", params
        # Another origin (graph.facebook.com behind a configured proxy or mirror):
        # keep what follows the version segment, e.g. /v21.0/<page>/posts.
        segments = path.strip("/").split("/")
        version_at = next((i for i, segment in enumerate(segments) if _VERSION.fullmatch(segment)), None)
        if version_at is None:
            raise parse_error(PLATFORM, f"paging.next points outside api_base: {parts.scheme}://{parts.netloc}{path}")
        return f"{self.api_base}/{'/'.join(segments[version_at + 1:])}", params

    def _get(self, url: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        token = credential(self.settings, "access_token", "FB_ACCESS_TOKEN")
        full_params = {**params, TOKEN_PARAM: token} if token else dict(params)
        response = self.transport.get(PLATFORM, url, params=full_params, headers={"User-Agent": BROWSER_USER_AGENT})
        body = decode_response(response, secrets=[token] if token else [])
        if not isinstance(body, dict):
            raise parse_error(PLATFORM, f"answer from {response.url} is not a JSON object", response.text)
        return body

    # -- re-resolution --------------------------------------------------------------------

    def resolve(self, record: MediaRecord) -> MediaRecord:
        """`video:{id}`: the video node's fresh `source`; `post:{id}`: the
        post again, for the same photo's freshly signed URL."""
        kind, _, ident = (record.resolve_ref or "").partition(":")
        if kind == "video":
            node = self.video_node(ident)
            source = as_str(node.get("source"))
            if not source:
                raise parse_error(PLATFORM, f"video {ident} answered without source", node)
            return replace(record, media_url=source)
        if kind == "post":
            post = self._get(self._object_url(ident), {"fields": normalize.POST_FIELDS})
            for item in self._post_items(post):
                if isinstance(item, MediaRecord) and item.key == record.key:
                    return replace(record, media_url=item.media_url)
            raise CrawlError(ErrorClass.NOT_FOUND, f"{record.canonical_url}: post {ident} no longer has this media")
        return record

    def download_headers(self, record: MediaRecord) -> dict[str, str]:
        return {"User-Agent": BROWSER_USER_AGENT}
