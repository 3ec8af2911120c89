"""One strict parse of a URL, before anything connects.

The parsers of Python's urllib, requests, urllib3 and browsers disagree on
odd URLs (`http://169.254.169.254\\.example.com/`, `http://%31%36%39.254.169.254/`,
`http://a@b@c/`, `http://2852039166/`), and a check that reads a URL one way
while the connection reads it another is the classic way round an allowlist.
So the URL is parsed here once, everything the parsers could read differently
is refused, and what is sent is rebuilt from this parse (`Target.url`): the
host the policy checked is the host the connection dials.
"""
from __future__ import annotations

import functools
import re
from urllib.parse import quote, urljoin

from media_crawler.models import item_record
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.net.addresses import Address, parse_address
from media_crawler.scrub import excerpt

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 8192
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_PART = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_CANONICAL_V4 = re.compile(r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_AUTHORITY_END = re.compile(r"[/?#]")
_SUSPECT_AUTHORITY = re.compile(r"[@\\%\s]")
# A path and query of characters _requote leaves as they are (no `%`, nothing to quote).
_TAIL_CHARS = r"A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;="
_PLAIN_TAIL = re.compile(f"^[{_TAIL_CHARS}]*$")
# A URL parse_target's steps would take apart as they are: a lower-case http(s) scheme, `//`,
# an authority without control characters or blanks, then a plain tail starting with `/`
# (no fragment, nothing to requote). Its authority is still judged by _authority.
_PLAIN_URL = re.compile(f"(https?)://([^/?#\\x00-\\x20\\x7f]*)(/[{_TAIL_CHARS}]*)")


@item_record
class Target:
    """A URL the policy can judge and the connection can dial, read the same way by both."""

    url: str  # what is sent: scheme://host[:port]/path?query, no userinfo, no fragment
    scheme: str
    host: str  # ASCII, lower case, no trailing dot; an IPv6 literal without brackets
    port: int  # explicit, else the scheme's default
    address: Address | None  # the host when it is an IP literal

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def join_reference(base: str, reference: str) -> str:
    """`reference` (a feed item, a `next` link, a Location) made absolute against `base`.

    Only a relative reference is joined: one with a scheme is taken as written, so
    `http:` or `http:169.254.169.254/` stays the host-less URL it is instead of
    becoming a path on `base`'s host. Surrounding white space is dropped, as
    browsers drop it. A backslash is refused: browsers read `\\host\\x` as
    `//host/x`, Python's urljoin as a path, and the two must not disagree.
    """
    reference = reference.strip(" \t\r\n\f\v\x00")
    if "\\" in reference:
        raise refuse("URL reference holds a backslash")
    if _SCHEME.match(reference):
        return reference
    try:
        return urljoin(base, reference)
    except ValueError:  # a malformed host in `reference` (`//[::1./`)
        raise refuse("URL reference is malformed") from None


def refuse(reason: str) -> CrawlError:
    return CrawlError(ErrorClass.DISALLOWED_URL, reason)


def parse_target(url: object) -> Target:
    """The Target of `url`, or CrawlError(disallowed_url) saying what is wrong with it."""
    if not isinstance(url, str) or not url:
        raise refuse("URL is empty or not a string")
    if len(url) > MAX_URL_LENGTH:
        raise refuse(f"URL is longer than {MAX_URL_LENGTH} characters")
    plain = _PLAIN_URL.fullmatch(url)
    if plain is None:
        scheme, authority, tail = _split(url)
    else:  # the steps of _split would take it apart the same way (one pattern instead of eight steps)
        scheme, authority, tail = plain.groups()
    host, port, explicit_port, address = _authority(authority, scheme)
    shown_host = f"[{host}]" if address is not None and address.version == 6 else host
    port_text = f":{port}" if explicit_port else ""
    return Target(f"{scheme}://{shown_host}{port_text}{tail}", scheme, host, port, address)


def _split(url: str) -> tuple[str, str, str]:
    """(scheme, authority, the path and query to send) of any URL, refused (CrawlError)
    when it holds control characters, is not http(s) or has no `//`."""
    if _CONTROL.search(url):
        raise refuse("URL holds control characters")
    match = _SCHEME.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in DEFAULT_PORTS:
        raise refuse(f"scheme {scheme or '(none)'!r} is not http(s)")
    rest = url[match.end():]
    if not rest.startswith("//"):
        raise refuse("URL has no host")
    rest = rest[2:]
    end = _AUTHORITY_END.search(rest)
    authority, tail = (rest[:end.start()], rest[end.start():]) if end else (rest, "")
    tail = tail.split("#", 1)[0]  # a fragment is never sent
    if not tail.startswith("/"):
        tail = "/" + tail
    if not _PLAIN_TAIL.match(tail):  # the usual path needs no requoting: skip its cost
        tail = _requote(tail)
    return scheme, authority, tail


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}")


def _requote(tail: str) -> str:
    """The path and query as requests' requote_uri writes them (the form the servers
    saw before the media path left requests): escapes of unreserved characters
    decoded, everything unsafe quoted, valid escapes kept. With a broken escape
    (`%zz`) every `%` is quoted as `%25` instead, as requote_uri does."""
    pieces = tail.split("%")
    for index in range(1, len(pieces)):
        pair = pieces[index][:2]
        if not _HEX_PAIR.fullmatch(pair):
            if pair.isalnum() and len(pair) == 2:  # requote_uri's test: a broken escape
                return quote(tail, safe="!#$&'()*+,/:;=?@[]~")
            pieces[index] = "%" + pieces[index]
            continue
        char = chr(int(pair, 16))
        pieces[index] = (char + pieces[index][2:]) if char in _UNRESERVED else "%" + pieces[index]
    return quote("".join(pieces), safe="!#$%&'()*+,/:;=?@[]~")


@functools.lru_cache(maxsize=4096)
def _authority(authority: str, scheme: str) -> tuple[str, int, bool, Address | None]:
    """(host, port, whether the port is written, the host's address if it is one); hosts
    repeat across a crawl's URLs, so the parse is cached. A refusal is not cached: it
    raises, and lru_cache keeps nothing then."""
    host, port, explicit_port = _split_authority(authority, scheme)
    return host, port, explicit_port, parse_address(host)


def _split_authority(authority: str, scheme: str) -> tuple[str, int, bool]:
    if not authority:
        raise refuse("URL has no host")
    if _SUSPECT_AUTHORITY.search(authority):
        if "@" in authority:
            raise refuse("URL carries userinfo (user:password@)")
        if "\\" in authority:
            raise refuse("URL host holds a backslash")
        if "%" in authority:
            raise refuse("URL host is percent-encoded")
        raise refuse("URL host holds white space")
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise refuse("URL has an unclosed IPv6 literal")
        host, after = authority[1:close], authority[close + 1:]
        if after and not after.startswith(":"):
            raise refuse("URL has characters after its IPv6 literal")
        address = parse_address(host)
        if address is None or address.version != 6:
            raise refuse("URL has a malformed IPv6 literal")
        host = str(address)
        port_text = after[1:] if after else None
    else:
        host, sep, port_text = authority.rpartition(":")
        if not sep:
            host, port_text = authority, None
        host = _name_or_ipv4(host)
    port = _port(port_text, scheme)
    return host, port, port_text not in (None, "") and port != DEFAULT_PORTS[scheme]


def _port(text: str | None, scheme: str) -> int:
    if text is None or text == "":
        return DEFAULT_PORTS[scheme]
    if not text.isascii() or not text.isdigit() or not 0 < int(text) < 65536:
        raise refuse("URL port is not a number from 1 to 65535")
    return int(text)


def _name_or_ipv4(host: str) -> str:
    if ":" in host:
        raise refuse("URL host holds a colon")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise refuse("URL host is not a valid internationalized name") from None
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise refuse("URL has no host")
    labels = host.split(".")
    # A last label that is a number makes the whole host an IPv4 address to
    # browsers and to inet_aton (`127.1`, `0x7f.1`, `2852039166`): only the
    # canonical dotted quad is accepted, so one spelling means one address.
    if _NUMERIC_PART.match(labels[-1]) or all(_NUMERIC_PART.match(label) for label in labels):
        if not _CANONICAL_V4.match(host):
            raise refuse(f"URL host {excerpt(repr(host), 62)} is not a canonical IPv4 address")
        return host
    if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise refuse(f"URL host {excerpt(repr(host), 62)} is not a valid host name")
    return host
