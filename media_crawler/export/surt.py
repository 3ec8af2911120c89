"""The index's URL key: SURT, as the `surt` package (pywb's, cdxj-indexer's) writes it
by default, for the URLs an export holds, so a replay tool finds them in our index.

`http://www.Example.com:80/A?b=2&a=1#frag` is `com,example)/a?a=1&b=2`: the scheme,
`www.`, the default port and the fragment dropped, the host's labels reversed, the
query's parameters sorted, percent-escapes undone where a printable character results,
everything lower-cased. media_crawler_tests/export/test_surt.py holds it to the package.
"""
from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes, urlsplit

_WWW = re.compile(r"^www\d*\.")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def surt(url: str) -> str:
    try:
        parts = urlsplit(url.strip())
        host, port = (parts.hostname or ""), parts.port
    except ValueError:
        return url.lower()
    scheme = parts.scheme.lower()
    host = _WWW.sub("", host.strip(".").lower())
    labels = host.split(".")
    key = ",".join(reversed(labels)) if labels != [""] else ""
    if port is not None and str(port) != _DEFAULT_PORTS.get(scheme):
        key += f":{port}"
    path = _canonical(parts.path).lower() or "/"
    query = "&".join(sorted(_canonical(pair).lower() for pair in parts.query.split("&"))) if parts.query else ""
    return key.lower() + ")" + path + (f"?{query}" if query else "")


def _canonical(text: str) -> str:
    """Percent-escapes undone, then the bytes that must stay escaped escaped again
    (controls, space, `#`, `%`, and anything past ASCII), as surt's Google canonicalizer."""
    raw = text.encode("utf-8", "surrogatepass")
    for _ in range(10):  # escapes of escapes, as far as they go
        decoded = unquote_to_bytes(raw)
        if decoded == raw:
            break
        raw = decoded
    return "".join(chr(b) if 32 < b < 127 and b not in (0x23, 0x25) else f"%{b:02X}" for b in raw)
