"""HTTP plumbing shared by the downloader and the API transport (no session: sessions.py).

- `NO_RETRIES`: urllib3's own retries switched off, for both the API session and
  the media transport (sessions.py): every retry decision belongs to the error
  taxonomy (errors.py), so a failure is retried once, by us, with the class's
  backoff, not silently by urllib3 underneath and then again by us.
- `Timeouts`: connect, read (waiting for the response headers) and stall (the
  longest gap between two body chunks).
- `redact_url`, `parse_retry_after`: safe log text and Retry-After in seconds.
"""
from __future__ import annotations

import email.parser
import functools
import http.client
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from urllib3.util.retry import Retry

from media_crawler.scrub import excerpt

# total=0/read=False: urllib3 raises on the first failure and never
# re-sends a request on its own (see the module docstring).
NO_RETRIES = Retry(total=0, connect=0, read=False, redirect=False, status=0)


@dataclass(frozen=True)
class Timeouts:
    """Seconds. `stall` bounds the silence between body chunks, so a server that
    sends headers and then nothing is a network_timeout, not a hung worker."""

    connect: float = 5.0
    read: float = 30.0
    stall: float = 30.0


# A URL urlsplit reads plainly: a lower-case scheme and host name (no userinfo, no IPv6
# literal), a port of digits, a path of visible characters, then the query, the fragment or the end.
_PLAIN_URL = re.compile(r"(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?(/[^?#\x00-\x20\x7f]*)?(?=[?#]|\Z)")

# An item's URL is redacted three times on its way (the request, the response, the retry
# log's context): the latest few are remembered (they are in memory anyway).
@functools.lru_cache(maxsize=256)
def redact_url(url: str) -> str:
    """scheme://host[:port]/path, without userinfo, query or fragment.

    Signed CDN URLs carry their signature and tokens in the query string, so
    this is the only form of a URL that may reach a log line or an error message.
    A URL too malformed to split (`http://[]`) is shown as its scheme alone.
    """
    plain = _PLAIN_URL.match(url)
    if plain is not None:
        # What urlsplit reads in a plain URL, without its parse (each item's URL is new
        # to the cache above: a parse per item). Anything else is split below.
        scheme, host, port_text, path = plain.groups()
        port = int(port_text) if port_text else 0
        if port <= 65535:
            return f"{scheme}://{host}{f':{port}' if port else ''}{path or '/'}"
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{excerpt(url.split(':', 1)[0], 16)}://(malformed)"
    try:
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        host, port = "(bad host)", ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)



# A header line the quick parse takes as it is: a token name, a colon, a value of visible
# characters, spaces and tabs. Anything else (a folded line, a name with a space, a line
# without a colon, a stray CR or NUL) goes to the standard library's email parser, so
# every odd answer is read exactly as http.client reads it. The value is the line after
# its leading blanks, as compat32 stores it; it starts with a non-blank (or is empty), so
# the blanks and the value split one way only: with `[ \t]*(.*)` a line of 60,000 blanks
# then a control character cost ~45 s of backtracking to refuse.
_PLAIN_LINE = r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*((?:[^\x00-\x20\x7f][^\x00-\x08\x0a-\x1f\x7f]*)?)\r?\n"
_PLAIN_HEADER = re.compile(_PLAIN_LINE)
# A block of plain lines: ended by the blank line, or by the end of the stream (the lines
# http.client's _read_headers returns then end with b"").
_PLAIN_LINES = re.compile(f"(?:{_PLAIN_LINE})*(?:\r?\n)?")
# The same block at the start of what the response's buffer holds, up to its blank line.
_BUFFERED_BLOCK = re.compile(f"(?:{_PLAIN_LINE})*\r?\n".encode("iso-8859-1"))


def parse_response_headers(fp) -> http.client.HTTPMessage:
    """http.client.parse_headers(fp), without the email package when every line is a plain
    `Name: value` (the answer of every CDN and server we talk to).

    http.client parses a header block through email.feedparser (a state machine, a
    policy call per header): about 20 us of a 130 us keep-alive GET here. This builds
    the same HTTPMessage holding the same (name, value) pairs as email's compat32
    policy would (the value without leading blanks or the line end), so http.client's
    framing, urllib3's header checks and requests' cookies read no difference. The
    header count and line length limits are http.client's own (_read_headers).

    The message also carries what its readers right after the parse ask of it, read
    off the same pairs (`quick_headers`): a lookup in the message walks every header
    through the email policy (~2 us each, and a response's readers made a dozen).
    """
    block = _buffered_block(fp)
    if block is None:
        text = b"".join(http.client._read_headers(fp)).decode("iso-8859-1")
        if _PLAIN_LINES.fullmatch(text) is None:
            return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)
    else:
        text = block.decode("iso-8859-1")
    pairs = _PLAIN_HEADER.findall(text)
    joined = {name.lower(): value for name, value in pairs}
    first = joined  # no name repeated (the usual block): each name's one value is both
    if len(joined) < len(pairs):
        first, joined = {}, {}
        for name, value in pairs:
            key = name.lower()
            if key in joined:
                joined[key] = f"{joined[key]}, {value}"
            else:
                first[key] = joined[key] = value
    message = http.client.HTTPMessage()
    # What `message[name] = value` stores under compat32 (HTTPMessage's policy): the pair as it
    # is (header_store_parse), no count limit (header_max_count is None). Set at once: the
    # policy's two calls per header were ~1.5 us each, seven headers a response.
    message._headers = pairs
    message._quick_headers = QuickHeaders(first, joined)
    return message


def _buffered_block(fp) -> bytes | None:
    """The header block, taken from fp's buffer in one read when the buffer holds all of it
    and every line is plain (else None, and nothing is taken): readline per line through
    http.client's _read_headers was a third of the parse. Only when _read_headers would
    return the same lines without complaint: the whole block within its line length limit
    (so every line is), and no more lines, the blank one included, than its header limit."""
    peek = getattr(fp, "peek", None)
    if peek is None:
        return None
    buffered = peek()
    match = _BUFFERED_BLOCK.match(buffered)
    if match is None:
        return None
    end = match.end()
    if end > http.client._MAXLINE or buffered.count(b"\n", 0, end) > http.client._MAXHEADERS:
        return None
    return fp.read(end)


class QuickHeaders:
    """A parsed header block's values by lower-case name, as `HTTPMessage.get` reads them
    (`first`: the first value of a name, the value as stored: compat32 hands a plain
    value back as it is) and as urllib3's HTTPHeaderDict joins them (`joined`: a repeated
    name's values joined by ", "; the same dict as `first` when no name repeats). Only for
    the readers right after the parse (the response's begin(), download/kept_alive.py's
    headers), which never change them: the message is not changed by then either."""

    __slots__ = ("first", "joined")

    def __init__(self, first: dict[str, str], joined: dict[str, str]) -> None:
        self.first, self.joined = first, joined


def quick_headers(message: http.client.HTTPMessage) -> QuickHeaders | None:
    """What `parse_response_headers` read off a plain header block; None for any other message."""
    return getattr(message, "_quick_headers", None)


# The response's socket buffer. http.client reads through io's default 8 KiB: the status
# line's first fill took the headers and a few KiB of body, and a 20 KB image then needed a
# second receive, and a second chunk to hash, write and loop over. At 64 KiB the first fill
# takes what has arrived of a small body too (below malloc's mmap threshold: no system
# call to allocate it). A larger read goes past the buffer anyway (BufferedReader.read1
# reads straight into its result once the buffer is empty), so large bodies are unchanged.
RESPONSE_BUFFER_BYTES = 64 * 1024


class QuickHeadersResponse(http.client.HTTPResponse):
    """http.client's response, its headers read by `parse_response_headers`, its socket
    read through a RESPONSE_BUFFER_BYTES buffer.

    begin() is http.client's (Python 3.11-3.13) with that one call changed: the
    stdlib calls its module's parse_headers by name, so there is no other hook.
    """

    def __init__(self, sock, debuglevel=0, method=None, url=None) -> None:
        # http.client's __init__ (3.11-3.13) makes its reader with sock.makefile("rb"): it is
        # handed a socket whose makefile gives the larger buffer instead.
        super().__init__(_LargerBuffer(sock), debuglevel, method, url)

    def begin(self) -> None:
        if self.headers is not None:
            return  # already begun
        while True:  # read until a non-100 response
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            http.client._read_headers(self.fp)  # skip the 100 response's headers
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10  # 0.9 is treated as 1.0, as http.client does
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_response_headers(self.fp)
        get = self._header_lookup()
        transfer_encoding = get("transfer-encoding")
        self.chunked = bool(transfer_encoding and transfer_encoding.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        # Content-Length, ignored under chunked (RFC 9112 6.3) and when negative or unreadable.
        self.length = None
        length = get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0  # no body, whatever the headers say
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # the body ends when the connection does

    def _header_lookup(self):
        quick = quick_headers(self.headers)
        return self.headers.get if quick is None else quick.first.get

    def _check_close(self) -> bool:
        """http.client's (3.11-3.13), its header lookups those of begin()."""
        get = self._header_lookup()
        conn = get("connection")
        if self.version == 11:  # HTTP/1.1 stays open unless told otherwise
            return bool(conn and "close" in conn.lower())
        if get("keep-alive"):  # older HTTP: Keep-Alive says persistent
            return False
        if conn and "keep-alive" in conn.lower():
            return False
        proxy_connection = get("proxy-connection")
        if proxy_connection and "keep-alive" in proxy_connection.lower():
            return False
        return True


class _LargerBuffer:
    """What HTTPResponse.__init__ asks of its socket (makefile), with the larger buffer."""

    __slots__ = ("_sock",)

    def __init__(self, sock) -> None:
        self._sock = sock

    def makefile(self, mode: str):
        return self._sock.makefile(mode, RESPONSE_BUFFER_BYTES)
