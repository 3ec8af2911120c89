"""The Weibo adapter: a user's posts from m.weibo.cn (`api: mobile`, the
default) or weibo.com's ajax API (`api: ajax`), detail fetches for abridged
entries, and re-resolution of signed video / live-photo URLs."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Mapping

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, MediaRecord, Source
from media_crawler.platforms.weibo import SPEC
from media_crawler.platforms.base import ApiTransport, CursorStore, FeedItem, PlatformAdapter
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.fields import as_str, dig
from media_crawler.platforms.headers import BROWSER_USER_AGENT, MOBILE_USER_AGENT, credential
from media_crawler.platforms.items import MALFORMED, item_failure
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.weibo import normalize
from media_crawler.platforms.weibo.errors import classify_body, decode_response
from media_crawler.platforms.weibo.posts import (
    FEED_PICTURE_LIMIT, PLATFORM, is_pinned, is_tombstone, needs_detail, picture_count, post_mid, post_time,
)
from media_crawler.platforms.window import NewestSeen, max_pages, page_reaches_before

APIS = dict(SPEC.source_options)["api"]  # sources.yaml refuses any other value; a Source built in code may not
Mblog = Mapping[str, Any]


class WeiboAdapter(PlatformAdapter):
    name = "weibo"
    default_api_base = "https://m.weibo.cn"
    default_ajax_base = "https://weibo.com"
    url_lifetime_s = 3600.0  # videos and live-photo clips; pictures do not expire (no resolve_ref)

    def __init__(
        self, settings: PlatformSettings, transport: ApiTransport, now: Callable[[], datetime] | None = None
    ) -> None:
        super().__init__(settings, transport)
        self._now = now or (lambda: datetime.now(timezone.utc))

    @property
    def ajax_base(self) -> str:
        return (self.settings.extra_api_bases.get("ajax") or self.default_ajax_base).rstrip("/")

    # -- the feed -------------------------------------------------------------------

    def iter_records(
        self, source: Source, window: DayWindow, cursors: CursorStore | None = None
    ) -> Iterator[FeedItem]:
        api = str(source.options.get("api", "mobile")).lower()
        if api not in APIS:
            raise CrawlError(ErrorClass.PARSE_ERROR, f"weibo source {source.key}: api must be one of {APIS}, not {api!r}")
        pages = self._mobile_pages(source.ident) if api == "mobile" else self._ajax_pages(source.ident)
        newest = NewestSeen(cursors, source.key)
        for mblogs in pages:
            now = self._now()
            ordered_times = []
            for mblog in mblogs:
                published_at = post_time(mblog, now)
                newest.observe(published_at)
                if not is_pinned(mblog):
                    ordered_times.append(published_at)
                if window.contains(published_at):
                    yield from self._post_items(mblog, api, window, now)
            if page_reaches_before(window, ordered_times):
                break
        newest.save()

    def _mobile_pages(self, uid: str) -> Iterator[list[Mblog]]:
        cursor: dict[str, str] = {}
        seen_cursors: set[tuple] = set()
        for _ in range(max_pages(self.settings)):
            params = {"type": "uid", "value": uid, "containerid": f"107603{uid}", **cursor}
            body = self._get(f"{self.api_base}/api/container/getIndex", params, "mobile")
            mblogs = normalize.mblogs_from_getindex(body) if body is not None else []
            if not mblogs:
                return
            yield mblogs
            cursor = normalize.getindex_next_params(body) or {}
            if not cursor or tuple(cursor.items()) in seen_cursors:  # a repeated cursor would loop forever
                return
            seen_cursors.add(tuple(cursor.items()))

    def _ajax_pages(self, uid: str) -> Iterator[list[Mblog]]:
        since_id = None
        for page in range(1, max_pages(self.settings) + 1):
            params = {"uid": uid, "page": page, "feature": 0, **({"since_id": since_id} if since_id else {})}
            body = self._get(f"{self.ajax_base}/ajax/statuses/mymblog", params, "ajax")
            mblogs = normalize.mblogs_from_ajax(body) if body is not None else []
            if not mblogs:
                return
            yield mblogs
            since_id = as_str(dig(body, "data", "since_id"))

    def _post_items(self, mblog: Mblog, api: str, window: DayWindow, now: datetime) -> Iterator[FeedItem]:
        try:
            mblog = self.complete_post(mblog, api)
        except (CrawlError, *MALFORMED) as exc:
            yield item_failure(PLATFORM, post_mid(mblog), exc)
            return
        # The detail may carry a precise time where the feed said "07-14".
        if window.contains(post_time(mblog, now)):
            yield from normalize.normalize_mblog(mblog, now, SPEC.setting(self.settings, "max_height"), api)

    # -- detail fetches ---------------------------------------------------------------

    def complete_post(self, mblog: Mblog, api: str) -> Mblog:
        """The post with everything a feed entry leaves out (pictures past the
        ninth, long text), for itself and for the original it reposts."""
        if needs_detail(mblog):
            mblog = self._detail(mblog, api)
        original = mblog.get("retweeted_status")
        if isinstance(original, Mapping) and not is_tombstone(original) and needs_detail(original):
            mblog = {**mblog, "retweeted_status": self._detail(original, api)}
        return mblog

    def _detail(self, abridged: Mblog, api: str) -> Mblog:
        mid = post_mid(abridged)
        if not mid:
            return abridged
        if api == "mobile":  # m. statuses/show has all pictures and the long text at once
            return self.fetch_post(mid, api)
        full = abridged
        if picture_count(abridged) > FEED_PICTURE_LIMIT:
            full = self.fetch_post(mid, api)
        if abridged.get("isLongText"):
            body = self._get(f"{self.ajax_base}/ajax/statuses/longtext", {"id": mid}, "ajax")
            text = as_str(dig(body, "data", "longTextContent"))
            full = {**full, "text_raw": text} if text else full
        return full

    def fetch_post(self, mid: str, api: str) -> Mblog:
        url = f"{self.api_base}/statuses/show" if api == "mobile" else f"{self.ajax_base}/ajax/statuses/show"
        body = self._get(url, {"id": mid}, api)
        mblog = normalize.mblog_from_show(body)
        if mblog is None:
            raise parse_error(PLATFORM, f"statuses/show for {mid} carries no post", body)
        return mblog

    # -- transport --------------------------------------------------------------------

    def _get(self, url: str, params: Mapping[str, Any], api: str) -> Any:
        """The decoded body, or None at the end of a list."""
        response = self.transport.get(PLATFORM, url, params=params, headers=self._api_headers(api))
        body = decode_response(response)
        return body if classify_body(body) == "ok" else None

    def _api_headers(self, api: str) -> dict[str, str]:
        headers = {"X-Requested-With": "XMLHttpRequest"}
        if api == "mobile":
            headers.update({"User-Agent": MOBILE_USER_AGENT, "Referer": "https://m.weibo.cn/", "MWeibo-Pwa": "1"})
        else:
            headers.update({"User-Agent": BROWSER_USER_AGENT, "Referer": "https://weibo.com/"})
        cookie = credential(self.settings, "cookie", "WEIBO_COOKIE")
        if cookie:
            headers["Cookie"] = cookie
        return headers

    # -- re-resolution and downloads ----------------------------------------------------

    def resolve(self, record: MediaRecord) -> MediaRecord:
        """A fresh signed URL for a video or live-photo clip, from the post's detail."""
        if not record.resolve_ref or not record.resolve_ref.startswith("show:"):
            return record
        _, api, mid = record.resolve_ref.split(":", 2)
        post = self.complete_post(self.fetch_post(mid, api), api)
        for fresh in normalize.normalize_mblog(post, self._now(), SPEC.setting(self.settings, "max_height"), api):
            if isinstance(fresh, MediaRecord) and fresh.key == record.key:
                return replace(record, media_url=fresh.media_url, backup_urls=fresh.backup_urls)
        raise CrawlError(ErrorClass.NOT_FOUND, f"{record.canonical_url}: post {mid} no longer offers {record.variant}")

    def download_headers(self, record: MediaRecord) -> dict[str, str]:
        # sinaimg answers 403 (or a placeholder picture) without a weibo.com Referer.
        return {"User-Agent": BROWSER_USER_AGENT, "Referer": "https://weibo.com/"}
