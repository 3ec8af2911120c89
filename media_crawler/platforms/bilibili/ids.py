"""Bilibili's two names for one video: the `aid` (`av170001`) and the `bvid`
(`BV17x411w7KC`), the second a reversible encoding of the first (the public
algorithm, bilibili-API-collect `docs/misc/bvid_desc.md`, valid for every aid below
2**51). Answers from before bvids existed (2020) carry the aid only; the crawler keys
videos on the bvid, so such an answer is named by the bvid its aid encodes to.
"""
from __future__ import annotations

import re

_XOR = 23442827791579
_MASK = (1 << 51) - 1
MAX_AID = 1 << 51
_ALPHABET = "FcwAPNKTMug3GV5Lj7EJnHpWsx4tb8haYeviqBz6rkCy12mUSDQX9RdoZf"
_BASE = len(_ALPHABET)
_SWAPS = ((3, 9), (4, 7))  # the positions the encoding exchanges after writing the digits
BVID = re.compile(rf"^BV1[{_ALPHABET}]{{9}}$")


def _swapped(chars: list[str]) -> list[str]:
    for a, b in _SWAPS:
        chars[a], chars[b] = chars[b], chars[a]
    return chars


def aid_to_bvid(aid: int) -> str:
    """`170001` -> `BV17x411w7KC`; ValueError for an aid outside 1..2**51-1."""
    if isinstance(aid, bool) or not isinstance(aid, int) or not 0 < aid < MAX_AID:
        raise ValueError(f"aid {aid!r} is not a Bilibili video number (1 to 2**51-1)")
    chars = list("BV1000000000")
    value = (MAX_AID | aid) ^ _XOR
    index = len(chars) - 1
    while value:
        value, digit = divmod(value, _BASE)
        chars[index] = _ALPHABET[digit]
        index -= 1
    return "".join(_swapped(chars))


def bvid_to_aid(bvid: str) -> int:
    """`BV17x411w7KC` -> `170001`; ValueError for a text that is not a bvid."""
    if not isinstance(bvid, str) or not BVID.match(bvid):
        raise ValueError(f"{bvid!r} is not a bvid (BV1 and nine base-58 characters)")
    value = 0
    for char in _swapped(list(bvid))[3:]:
        value = value * _BASE + _ALPHABET.index(char)
    return (value & _MASK) ^ _XOR
