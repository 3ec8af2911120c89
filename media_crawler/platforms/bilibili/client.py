"""The Bilibili adapter: uploads list → view → playurl, WBI-signed.

Per video inside the window: the cover (from the list), the view (parts,
owner), then one playurl per part. Videos outside the window cost nothing
beyond their line in the list page.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any, Callable, Iterator, Mapping

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, MediaRecord, Source
from media_crawler.platforms.bilibili import SPEC
from media_crawler.platforms.base import ApiTransport, CursorStore, FeedItem, PlatformAdapter
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.bilibili import normalize
from media_crawler.platforms.bilibili.errors import (
    PLATFORM, classify_envelope, data_or_raise, decode_response, is_bad_signature,
)
from media_crawler.platforms.bilibili.normalize import VideoInfo, VideoPart
from media_crawler.platforms.bilibili.wbi import WbiKeyCache, keys_from_nav, signed_query
from media_crawler.platforms.fields import MissingField
from media_crawler.platforms.headers import BROWSER_USER_AGENT, credential
from media_crawler.platforms.items import MALFORMED, guarded, item_failure
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.window import NewestSeen, max_pages, page_reaches_before

REFERER = "https://www.bilibili.com/"
PAGE_SIZE = 30
# fnval 4048 = DASH + HDR + 4K + Dolby + 8K + AV1: ask for every stream, choose locally.
PLAYURL_PARAMS = {"fnval": 4048, "fnver": 0, "fourk": 1}
# The web player sends these WebGL fingerprints with arc/search; without them
# the endpoint answers -352 (risk control) far more often.
ARC_SEARCH_FINGERPRINT = {
    "dm_img_list": "[]",
    "dm_img_str": "V2ViR0wgMS4wIChPcGVuR0wgRVMgMi4wIENocm9taXVtKQ",
    "dm_cover_img_str": "QU5HTEUgKEludGVsLCBJbnRlbChSKSBVSEQgR3JhcGhpY3MpR29vZ2xlIEluYy4gKEludGVsKQ",
}


class BilibiliAdapter(PlatformAdapter):
    name = "bilibili"
    default_api_base = "https://api.bilibili.com"
    url_lifetime_s = 7200.0

    def __init__(
        self, settings: PlatformSettings, transport: ApiTransport, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(settings, transport)
        self.wbi_keys = WbiKeyCache(self._fetch_wbi_keys, clock=clock)
        # A per-process browser id: anonymous web clients always carry one.
        self._buvid3 = f"{uuid.uuid4()}infoc".upper()

    # -- the feed -------------------------------------------------------------------

    def iter_records(
        self, source: Source, window: DayWindow, cursors: CursorStore | None = None
    ) -> Iterator[FeedItem]:
        newest = NewestSeen(cursors, source.key)
        for pn in range(1, max_pages(self.settings) + 1):
            params = {"mid": source.ident, "pn": pn, "ps": PAGE_SIZE, "order": "pubdate", **ARC_SEARCH_FINGERPRINT}
            data = self._signed_get("/x/space/wbi/arc/search", params, "arc/search")
            entries = normalize.arc_search_entries(data)
            for entry in entries:
                published_at = normalize.entry_published_at(entry)
                newest.observe(published_at)
                if window.contains(published_at):
                    yield from self._video_records(entry)
            moments = [normalize.entry_published_at(entry) for entry in entries]
            if not entries or page_reaches_before(window, moments) or not normalize.arc_search_has_more(data, pn):
                break
        newest.save()

    def _video_records(self, entry: Mapping[str, Any]) -> Iterator[FeedItem]:
        bvid = normalize.video_bvid(entry)
        yield from guarded(PLATFORM, bvid, lambda: normalize.cover_from_entry(entry))
        if not bvid:
            return
        try:
            info = self.video_info(bvid)
        except (CrawlError, *MALFORMED) as exc:
            yield item_failure(PLATFORM, bvid, exc)
            return
        # Dated by the list entry, which decided that the video is in this
        # window (view.pubdate can differ from the upload's `created`).
        listed_at = normalize.entry_published_at(entry)
        for part in info.parts:
            yield from self._part_records(replace(part, published_at=listed_at))

    def _part_records(self, part: VideoPart) -> Iterator[FeedItem]:
        try:
            data = self.playurl(part.bvid, part.cid)
        except (CrawlError, *MALFORMED) as exc:
            yield item_failure(PLATFORM, part.item_id, exc)
            return
        limits = SPEC.setting(self.settings, "max_height"), SPEC.setting(self.settings, "codec_order")
        yield from guarded(PLATFORM, part.item_id, lambda: normalize.records_from_playurl(data, part, *limits))

    # -- API calls --------------------------------------------------------------------

    def video_info(self, bvid: str) -> VideoInfo:
        """The view of one video; parts from x/player/pagelist when view lists none.

        Raises CrawlError for what the API said, MissingField for a view whose
        shape drifted (one item's parse_error, see items.item_failure)."""
        view = data_or_raise(self._get_json("/x/web-interface/view", {"bvid": bvid}, "view"), "view")
        if not isinstance(view, Mapping):
            raise MissingField(f"view of {bvid} has no data object")
        info = normalize.video_info_from_view(view)
        if info.parts:
            return info
        pages = data_or_raise(self._get_json("/x/player/pagelist", {"bvid": bvid}, "pagelist"), "pagelist")
        parts = normalize.parts_from_pages(pages, bvid, info.published_at, info.meta)
        if not parts:
            raise MissingField(f"neither view nor pagelist lists a cid for {bvid}")
        return replace(info, parts=parts)

    def playurl(self, bvid: str, cid: str) -> Any:
        return self._signed_get("/x/player/wbi/playurl", {"bvid": bvid, "cid": cid, **PLAYURL_PARAMS}, "playurl")

    def _signed_get(self, path: str, params: Mapping[str, Any], endpoint: str) -> Any:
        """GET a WBI endpoint; a rejected signature (-403) refreshes the keys
        and retries once, because keys rotate under a running crawl."""
        body = self._get_json(f"{path}?{signed_query(params, self.wbi_keys.mixin())}", None, endpoint)
        error = classify_envelope(body, endpoint)
        if error is not None and is_bad_signature(error):
            self.wbi_keys.invalidate()
            body = self._get_json(f"{path}?{signed_query(params, self.wbi_keys.mixin())}", None, endpoint)
            error = classify_envelope(body, endpoint)
        if error is not None:
            raise error
        return body.get("data")

    def _fetch_wbi_keys(self) -> tuple[str, str]:
        body = self._get_json("/x/web-interface/nav", None, "nav")
        keys = keys_from_nav(body)
        if keys is None:
            raise classify_envelope(body, "nav") or parse_error(PLATFORM, "nav carries no wbi_img keys", body)
        return keys

    def _get_json(self, path_and_query: str, params: Mapping[str, Any] | None, endpoint: str) -> Any:
        response = self.transport.get(
            PLATFORM, f"{self.api_base}{path_and_query}", params=params, headers=self._api_headers()
        )
        return decode_response(response, endpoint)

    def _api_headers(self) -> dict[str, str]:
        cookies = [f"buvid3={self._buvid3}"]
        sessdata = credential(self.settings, "sessdata", "BILIBILI_SESSDATA")
        if sessdata:
            cookies.append(f"SESSDATA={sessdata}")
        return {"User-Agent": BROWSER_USER_AGENT, "Referer": REFERER, "Cookie": "; ".join(cookies)}

    # -- re-resolution and downloads ----------------------------------------------------

    def resolve(self, record: MediaRecord) -> MediaRecord:
        """Fresh signed URLs for the same stream variant (same qn and codec)."""
        if not record.resolve_ref or not record.resolve_ref.startswith("playurl:"):
            return record
        _, bvid, cid = record.resolve_ref.split(":", 2)
        part = VideoPart(bvid, cid, published_at=record.published_at)
        for fresh in normalize.all_stream_records(self.playurl(bvid, cid), part):
            if fresh.variant == record.variant:
                return replace(record, media_url=fresh.media_url, backup_urls=fresh.backup_urls)
        raise CrawlError(ErrorClass.NOT_FOUND, f"{record.canonical_url}: playurl no longer offers {record.variant}")

    def download_headers(self, record: MediaRecord) -> dict[str, str]:
        # The video CDN answers 403 without the Referer. No cookies: SESSDATA
        # is for the API only and must not travel to CDN hosts.
        return {"User-Agent": BROWSER_USER_AGENT, "Referer": REFERER}

