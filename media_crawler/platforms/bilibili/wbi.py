"""WBI request signing for Bilibili's `/wbi/` endpoints.

The img/sub keys come from `x/web-interface/nav` (they rotate about daily),
are permuted by a public table into a 32-character mixin key, and every signed
request carries `wts` (unix seconds) and `w_rid = md5(sorted query + mixin)`.
"""
from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Callable, Mapping
from urllib.parse import quote, urlencode

from media_crawler.platforms.fields import dig

MIXIN_KEY_ENC_TAB = (
    46, 47, 18, 2, 53, 8, 23, 32, 15, 50, 10, 31, 58, 3, 45, 35, 27, 43, 5, 49, 33, 9, 42, 19, 29, 28, 14, 39,
    12, 38, 41, 13, 37, 48, 7, 16, 24, 55, 40, 61, 26, 17, 0, 1, 60, 51, 30, 4, 22, 25, 54, 21, 56, 59, 6, 63,
    57, 62, 11, 36, 20, 34, 44, 52,
)
_DROPPED_CHARS = str.maketrans("", "", "!'()*")
_KEY = re.compile(r"[0-9A-Za-z]{32}")  # img_key and sub_key: 32 characters each, the mixin permutes all 64
KEY_TTL_S = 3600.0  # keys change about daily; an hour keeps a stale key's damage small


def mixin_key(img_key: str, sub_key: str) -> str:
    raw = img_key + sub_key
    return "".join(raw[index] for index in MIXIN_KEY_ENC_TAB)[:32]


def keys_from_nav(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(img_key, sub_key) from a nav answer, or None when it carries no keys.

    nav answers code -101 (not logged in) to anonymous clients *with* the
    keys present: that is the normal case, not an auth failure.
    """
    img_url = dig(body, "data", "wbi_img", "img_url")
    sub_url = dig(body, "data", "wbi_img", "sub_url")
    if not isinstance(img_url, str) or not isinstance(sub_url, str):
        return None
    img_key, sub_key = _basename(img_url), _basename(sub_url)
    return (img_key, sub_key) if _KEY.fullmatch(img_key) and _KEY.fullmatch(sub_key) else None


def signed_query(params: Mapping[str, Any], mixin: str, wts: int | None = None) -> str:
    """The full query string (with wts and w_rid) to append after `?`.

    Returned as a string, not a dict, so the bytes on the wire are exactly
    the bytes that were hashed (%20 for spaces, upper-case hex).
    """
    signed = {**{key: str(value) for key, value in params.items()}, "wts": str(int(time.time()) if wts is None else wts)}
    cleaned = {key: value.translate(_DROPPED_CHARS) for key, value in sorted(signed.items())}
    query = urlencode(cleaned, quote_via=quote)
    w_rid = hashlib.md5((query + mixin).encode()).hexdigest()
    return f"{query}&w_rid={w_rid}"


class WbiKeyCache:
    """The current mixin key, fetched through `fetch_keys` at most once per
    TTL, and on demand after the API rejected a signature (code -403)."""

    def __init__(
        self,
        fetch_keys: Callable[[], tuple[str, str]],
        ttl_s: float = KEY_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch_keys = fetch_keys
        self._ttl_s = ttl_s
        self._clock = clock
        self._mixin: str | None = None
        self._fetched_at = 0.0

    def mixin(self) -> str:
        if self._mixin is None or self._clock() - self._fetched_at >= self._ttl_s:
            self._mixin = mixin_key(*self._fetch_keys())
            self._fetched_at = self._clock()
        return self._mixin

    def invalidate(self) -> None:
        self._mixin = None


def _basename(url: str) -> str:
    return url.rsplit("/", 1)[-1].split("?", 1)[0].rsplit(".", 1)[0]
