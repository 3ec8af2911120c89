"""Ids that look random but decode back to the coordinates they were made from.

`Scrambler(seed, tag, modulus)` is an affine bijection on 0..modulus-1 whose
constants derive from (seed, tag): `encode(n)` hides the order of n, `decode`
inverts it exactly, so an API lookup by id needs no index.
"""
from __future__ import annotations

import hashlib
import math

BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


class Scrambler:
    def __init__(self, seed: int, tag: str, modulus: int) -> None:
        digest = hashlib.sha256(f"{seed}/scramble/{tag}".encode()).digest()
        self.modulus = modulus
        factor = int.from_bytes(digest[:16], "big") % modulus | 1
        while math.gcd(factor, modulus) != 1:
            factor = (factor + 2) % modulus
        self._factor = factor
        self._inverse = pow(factor, -1, modulus)
        self._offset = int.from_bytes(digest[16:], "big") % modulus

    def encode(self, number: int) -> int:
        if not 0 <= number < self.modulus:
            raise ValueError(f"{number} out of range for this id space")
        return (number * self._factor + self._offset) % self.modulus

    def decode(self, code: int) -> int:
        return ((code - self._offset) * self._inverse) % self.modulus


def to_base(number: int, alphabet: str, width: int) -> str:
    digits = ""
    while number:
        number, rest = divmod(number, len(alphabet))
        digits = alphabet[rest] + digits
    if len(digits) > width:
        raise ValueError(f"{number} does not fit {width} digits")
    return digits.rjust(width, alphabet[0])


def from_base(text: str, alphabet: str) -> int | None:
    """The number `text` spells in `alphabet`, or None for a character outside it."""
    number = 0
    for char in text:
        position = alphabet.find(char)
        if position < 0:
            return None
        number = number * len(alphabet) + position
    return number
