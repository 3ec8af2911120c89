"""What each simulated CDN demands before serving a file, mirroring the real ones:

- Bilibili video CDN: `deadline=<unix>&upsig=<hex>&uparams=<signed keys>` and a
  `Referer` on bilibili.com (403 otherwise);
- Weibo: images want a Referer on weibo.com/weibo.cn; video and live-photo URLs carry
  `Expires=<unix>&ssig=<hex>&KID=`;
- Facebook fbcdn: `oh=<hex>&oe=<hex unix expiry>`.

URLs are signed when an API answer is built (fresh on every call, valid for
`lifetime_s`), so a crawler that keeps a URL too long, or edits one, gets the 403 a
real CDN gives and has to re-resolve it through the API.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from typing import Callable, Mapping
from urllib.parse import urlencode

from media_crawler_sim.catalog import BILIBILI_VIDEO, FACEBOOK, OPEN, WEIBO_IMAGE, WEIBO_VIDEO, MediaFile

DEFAULT_URL_LIFETIME_S = 7200
_BILIBILI_SIGNED_KEYS = ("e", "uipk", "nbs", "deadline", "gen", "os", "og", "platform")


class CdnRules:
    def __init__(self, secret: bytes, lifetime_s: float = DEFAULT_URL_LIFETIME_S, clock: Callable[[], float] | None = None):
        self._secret = secret
        self.lifetime_s = lifetime_s
        self._clock = clock or time.time

    def _mac(self, message: str, length: int) -> str:
        return hmac.new(self._secret, message.encode(), hashlib.sha256).hexdigest()[:length]

    # --- signing (answer side) -----------------------------------------------------

    def url(self, base_url: str, file: MediaFile, *, mirror: int = 0, label: str = "") -> str:
        """The URL an API answer links to: `mirror` tells Bilibili backup URLs apart,
        `label` is Weibo's quality label (mp4_hd...)."""
        query = self._query(file, mirror, label)
        return base_url + file.path + ("?" + urlencode(query) if query else "")

    def _query(self, file: MediaFile, mirror: int, label: str) -> dict[str, str]:
        expiry = int(self._clock() + self.lifetime_s)
        if file.cdn == BILIBILI_VIDEO:
            query = {
                "e": self._mac("e" + file.path, 24),
                "uipk": "1",
                "nbs": "1",
                "deadline": str(expiry),
                "gen": "playurlv3",
                "os": ("mcdn", "cosbv", "upos")[mirror % 3],
                "og": "hw",
                "platform": "pc",
            }
            query["upsig"] = self._bilibili_upsig(file.path, query, _BILIBILI_SIGNED_KEYS)
            query.update(uparams=",".join(_BILIBILI_SIGNED_KEYS), bvc="vod", nettype="0", orderid=f"{mirror},3")
            return query
        if file.cdn == WEIBO_VIDEO:
            query = {"label": label} if label else {}
            template = f"{file.recipe.width}x{file.recipe.height}.25.0"
            query.update(template=template, ori="0", Expires=str(expiry))
            query.update(ssig=self._mac(f"{file.path}|{expiry}", 10), KID="unistore,video")
            return query
        if file.cdn == FACEBOOK:
            oe = format(expiry, "08X")
            signature = self._mac(f"{file.path}|{oe}", 32)
            return {"_nc_cat": "6", "ccb": "1-7", "_nc_sid": self._mac("sid" + file.path, 6), "oh": signature, "oe": oe}
        return {}

    def _bilibili_upsig(self, path: str, query: Mapping[str, str], keys: tuple[str, ...]) -> str:
        return self._mac(path + "?" + "&".join(f"{key}={query.get(key, '')}" for key in keys), 32)

    # --- checking (media side) -----------------------------------------------------

    def refusal(self, file: MediaFile, query: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
        """Why the CDN answers 403, or None when the request may be served."""
        referer = headers.get("Referer") or ""
        now = self._clock()
        if file.cdn == OPEN:
            return None
        if file.cdn == WEIBO_IMAGE:
            return None if ("weibo.com" in referer or "weibo.cn" in referer) else "missing weibo Referer"
        if file.cdn == BILIBILI_VIDEO:
            if "bilibili.com" not in referer:
                return "missing bilibili Referer"
            keys = tuple(key for key in (query.get("uparams") or "").split(",") if key)
            if "deadline" not in keys or not query.get("upsig"):
                return "unsigned URL"
            if not hmac.compare_digest(query["upsig"], self._bilibili_upsig(file.path, query, keys)):
                return "bad signature"
            return _expired(query.get("deadline"), now)
        if file.cdn == WEIBO_VIDEO:
            expires, ssig = query.get("Expires", ""), query.get("ssig", "")
            if not (expires and ssig and query.get("KID")):
                return "unsigned URL"
            if not hmac.compare_digest(ssig, self._mac(f"{file.path}|{expires}", 10)):
                return "bad signature"
            return _expired(expires, now)
        if file.cdn == FACEBOOK:
            oh, oe = query.get("oh", ""), query.get("oe", "")
            if not (oh and oe):
                return "unsigned URL"
            if not hmac.compare_digest(oh, self._mac(f"{file.path}|{oe}", 32)):
                return "URL signature mismatch"
            try:
                return _expired(str(int(oe, 16)), now)
            except ValueError:
                return "bad signature"
        raise ValueError(f"unknown CDN rule {file.cdn!r}")


def _expired(expiry: str | None, now: float) -> str | None:
    try:
        return None if now <= int(expiry or "") else "URL signature expired"
    except ValueError:
        return "bad expiry"
