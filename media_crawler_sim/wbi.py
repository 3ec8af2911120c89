"""Bilibili WBI request signing, as the simulator checks it (docs/PLATFORMS.md has the
algorithm and the test vector; the crawler keeps its own copy on purpose, so a bug
in one side is caught by the other instead of being shared)."""
from __future__ import annotations

import hashlib
from typing import Iterable
from urllib.parse import quote, quote_plus, urlencode

MIXIN_KEY_ENC_TAB = (
    46, 47, 18, 2, 53, 8, 23, 32, 15, 50, 10, 31, 58, 3, 45, 35, 27, 43, 5, 49, 33, 9,
    42, 19, 29, 28, 14, 39, 12, 38, 41, 13, 37, 48, 7, 16, 24, 55, 40, 61, 26, 17, 0, 1,
    60, 51, 30, 4, 22, 25, 54, 21, 56, 59, 6, 63, 57, 62, 11, 36, 20, 34, 44, 52,
)
_DROPPED_CHARS = "!'()*"


def mixin_key(img_key: str, sub_key: str) -> str:
    raw = img_key + sub_key
    return "".join(raw[index] for index in MIXIN_KEY_ENC_TAB)[:32]


def w_rid(params: Iterable[tuple[str, str]], mixin: str, *, quote_via=quote) -> str:
    """md5 of the sorted, filtered, url-encoded query (which must include wts) + mixin."""
    cleaned = sorted((key, "".join(c for c in str(value) if c not in _DROPPED_CHARS)) for key, value in params)
    query = urlencode(cleaned, quote_via=quote_via)
    return hashlib.md5((query + mixin).encode()).hexdigest()


def sign(params: dict[str, str], img_key: str, sub_key: str, wts: int) -> dict[str, str]:
    """The params plus wts and w_rid, ready to send (used by tests and docs)."""
    signed = {key: "".join(c for c in str(value) if c not in _DROPPED_CHARS) for key, value in params.items()}
    signed["wts"] = str(wts)
    signed["w_rid"] = w_rid(signed.items(), mixin_key(img_key, sub_key))
    return signed


def verify(pairs: list[tuple[str, str]], img_key: str, sub_key: str) -> bool:
    """True when the query's w_rid matches. Spaces may be encoded as %20 (browser
    encodeURIComponent) or + (Python's urlencode default): both clients exist."""
    given = [value for key, value in pairs if key == "w_rid"]
    rest = [(key, value) for key, value in pairs if key != "w_rid"]
    if len(given) != 1 or not any(key == "wts" for key, _ in rest):
        return False
    mixin = mixin_key(img_key, sub_key)
    return given[0] in (w_rid(rest, mixin), w_rid(rest, mixin, quote_via=quote_plus))
