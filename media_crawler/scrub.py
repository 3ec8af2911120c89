"""The one scrubber: secrets never reach logs, metadata, error messages, stderr or storage.

Two layers:
- by *name*: query parameters whose name says they carry a credential or a
  signature are removed from URLs, and `name=value` pairs of those names are
  masked in free text;
- by *value*: every configured credential (the environment variables
  `credential_env` names, and the adapters' default ones) is registered once,
  in every form a platform or a proxy may echo it back in: raw, URL-encoded
  (both hex cases, `+` for spaces or not), URL-decoded, and base64 (standard
  and URL-safe, padded or not). Any text holding one of them is masked.

Texts that quote foreign bytes are scrubbed whole *before* they are shortened
(`excerpt`): a cut made first can fall inside a secret and leave its start, a form
nobody registered, to pass every later scrub.

Signature-like query parameters (`signature`, `auth_key`, `X-Amz-Signature`, ...,
and those a platform declares, Facebook's `oh`/`oe`) are never part of an item's
identity (`identity_url`) and are dropped from every scrubbed URL; the fetch URL
keeps them, since the CDN needs them, until `compact`.

Every edge calls it: CrawlError messages (errors.py), ledger rows
(store/ledger.py), JSON log lines (observe/logging.py), Dagster metadata and
Failure descriptions (defs/assets.py), the reports and the CLI's stderr.
"""
from __future__ import annotations

import base64
import re
import threading
from typing import Iterable
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

from media_crawler.environment import environment_value

MASK = "***"
MIN_SECRET_LENGTH = 6  # shorter values would mangle whole texts without protecting anything

# Exact names (lower-case) seen on the three platforms and their CDNs.
SECRET_PARAM_NAMES = frozenset(
    {
        "access_token", "sessdata", "w_rid", "sign", "token", "upsig", "ssig", "oh", "sig",
        "signature", "appsecret_proof", "client_secret", "password", "api_key", "apikey",
        "x-amz-signature", "x-amz-credential", "x-amz-security-token", "auth", "sub", "subp",
        "bili_jct", "cookie",
    }
)
# Query parameters that sign a URL (CDNs, S3, CloudFront): they change when the URL is
# re-signed, so they are not identity, and they grant access, so they are not for logs.
SIGNATURE_PARAM_NAMES = frozenset({"signature", "sig", "auth_key", "x-amz-signature", "policy", "key-pair-id"})
# Anything else that *looks* like a credential or signature by its name.
_SECRET_NAME = re.compile(r"(token|secret|signature|passw|credential|sessdata|_sig$|^sig_)", re.IGNORECASE)
# Facebook's paging cursor is not a secret and is useful when reading logs.
_NOT_SECRET = frozenset({"__paging_token"})

_URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>]+")
_PAIR_IN_TEXT = re.compile(
    r"(?i)\b(access_token|sessdata|token|w_rid|upsig|ssig|sign|signature|sub|subp|bili_jct|auth_key|sig"
    r"|x-amz-signature|key-pair-id)=([^&;\s\"']+)")

# The variables the adapters read when sources.yaml names none (platforms/headers.py
# `credential(..., default_env)`): a secret sent by default must be masked by default.
DEFAULT_CREDENTIAL_ENVS = ("BILIBILI_SESSDATA", "FB_ACCESS_TOKEN", "WEIBO_COOKIE")

_LOCK = threading.Lock()  # serializes registrations; readers take the current tuple without it
_REGISTERED: tuple[str, ...] = ()  # longest first, so a longer form is masked before a part of it
# Signature parameters platforms declared (PlatformSpec.signature_params), lower-case.
_PLATFORM_SIGNATURE_PARAMS: frozenset[str] = frozenset()


def is_secret_param(name: str) -> bool:
    lowered = name.lower()
    if lowered in _NOT_SECRET:
        return False
    return (lowered in SECRET_PARAM_NAMES or is_signature_param(lowered)
            or bool(_SECRET_NAME.search(lowered)))


def is_signature_param(name: str, extra: Iterable[str] = ()) -> bool:
    """A query parameter that signs the URL (generic, a platform's declared ones, `extra`)."""
    lowered = name.lower()
    return (lowered in SIGNATURE_PARAM_NAMES or lowered in _PLATFORM_SIGNATURE_PARAMS
            or lowered in {n.lower() for n in extra})


def register_signature_params(names: Iterable[str]) -> None:
    """Drop these query parameters (a platform's `signature_params`) from every scrubbed URL."""
    global _PLATFORM_SIGNATURE_PARAMS
    lowered = frozenset(name.lower() for name in names)
    if not lowered <= _PLATFORM_SIGNATURE_PARAMS:
        with _LOCK:
            _PLATFORM_SIGNATURE_PARAMS = _PLATFORM_SIGNATURE_PARAMS | lowered


def encodings(value: str) -> set[str]:
    """The forms of `value` a response may echo it back in."""
    forms = {value, unquote(value), unquote_plus(value)}
    for form in list(forms):
        for encoded in (quote(form, safe=""), quote(form), quote_plus(form, safe="")):
            forms.update({encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)})
    raw = value.encode("utf-8", "surrogatepass")
    for coded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = coded.decode("ascii")
        forms.update({text, text.rstrip("=")})
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def register_secret(value: str | None) -> None:
    """Mask this value, in all its encodings, in every scrubbed text from now on."""
    global _REGISTERED
    if not value or len(value) < MIN_SECRET_LENGTH:
        return
    forms = encodings(value)
    with _LOCK:
        if forms.issubset(_REGISTERED):
            return
        # A new tuple, never an update in place: a reader on another thread
        # sees the old set or the new one, whole.
        _REGISTERED = tuple(sorted(set(_REGISTERED) | forms, key=len, reverse=True))


def registered_forms() -> tuple[str, ...]:
    """Every registered form, longest first: a new tuple after each registration, so a
    scrubbed text kept aside holds for as long as this returns the same object."""
    return _REGISTERED


def register_environment_secrets(env_names: Iterable[str] = ()) -> None:
    """Mask the values of these environment variables and of the default credential ones.

    A cookie header value ("SUB=...; SUBP=...") is registered whole and part by
    part, since an error text may quote one cookie without the others.
    """
    for name in {*env_names, *DEFAULT_CREDENTIAL_ENVS}:
        value = environment_value(name)
        register_secret(value)
        for part in (value or "").split(";"):
            register_secret(part.split("=", 1)[-1].strip())


def mask_secrets(text: str, extra: Iterable[str | None] = ()) -> str:
    """`text` with every registered secret form, and every value in `extra`, masked."""
    if not text:
        return text
    if len(text) >= MIN_SECRET_LENGTH:  # every registered form is that long (encodings()): none fits in less
        for secret in _REGISTERED:
            if secret in text:
                text = text.replace(secret, MASK)
    for secret in extra:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_secrets_in_bytes(data: bytes, extra: Iterable[str | None] = ()) -> bytes:
    """`data` with every registered secret form, and every value in `extra` (in its
    encodings), masked: bytes kept as fetched (an API answer's body) are scrubbed by value,
    byte for byte, so whatever is not a secret stays exactly as the platform sent it."""
    if not data:
        return data
    forms = {form for value in extra if value and len(value) >= MIN_SECRET_LENGTH for form in encodings(value)}
    mask = MASK.encode()
    for secret in sorted({*_REGISTERED, *forms}, key=len, reverse=True):
        needle = secret.encode("utf-8", "surrogatepass")
        if needle in data:
            data = data.replace(needle, mask)
    return data


def scrub_url(url: str, extra: Iterable[str | None] = ()) -> str:
    """`url` without secret query parameters or userinfo, secret values masked; safe to log.

    Secrets are masked in the URL as written *and* in each decoded query value before
    the query is encoded again: re-encoding spells a value differently (`,` for `%2C`,
    `%3D` for `=`), and a spelling nobody registered would slip past the last mask."""
    masked = mask_secrets(url, extra)
    if "?" not in masked and "@" not in masked:
        # Nothing to split: masking again what the first pass left unchanged would change nothing.
        return masked if masked == url else mask_secrets(masked, extra)
    url = masked
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]  # drop user:password@
        query = ""
        if parts.query:
            kept = [(k, mask_secrets(v, extra)) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                    if not is_secret_param(k)]
            query = urlencode(kept, safe="/:,*")
        url = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # a URL that does not split, or a lone surrogate urlencode cannot encode
        url = _PAIR_IN_TEXT.sub(lambda m: f"{m.group(1)}={MASK}", url)
    return mask_secrets(url, extra)


def scrub_text(text: str, extra: Iterable[str | None] = ()) -> str:
    """`text` with URLs scrubbed, `name=value` credential pairs masked, and every
    registered secret (and every value in `extra`) masked."""
    if not text:
        return text
    if len(text) < MIN_SECRET_LENGTH and "=" not in text and not extra:
        return text  # ("ok", a stage name) shorter than any URL or registered form, and no pair
    # The substring tests skip the regular expressions for the usual text
    # (a stage name, an error sentence): both patterns need "://" or "=".
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda match: scrub_url(match.group(0)), text)
    if "=" in text:
        text = _PAIR_IN_TEXT.sub(lambda m: f"{m.group(1)}={MASK}", text)
    return mask_secrets(text, extra)


def secret_values(params: dict | None) -> list[str]:
    """The values of secret-named params: what to mask in an exception text
    that may quote the request URL."""
    return [str(v) for k, v in (params or {}).items() if is_secret_param(str(k)) and v]


# Past this length a text is cut (generously) before it is scrubbed: the scrub of a
# multi-megabyte body would cost more than the excerpt is worth. The margin keeps every
# secret and URL that reaches into the excerpt whole while it is scrubbed.
_PRE_CUT_MARGIN = 16_384


def excerpt(text: str | None, limit: int, extra: Iterable[str | None] = ()) -> str:
    """At most `limit` characters of `text`, scrubbed *before* the cut, the one way to
    shorten a text that quotes foreign bytes (an answer's body, an error's message).

    The cut never leaves the start of a secret: a suffix of the excerpt that begins a
    registered form (or a value in `extra`), `MIN_SECRET_LENGTH` characters or more of
    it, is masked too. Such a start survives the scrub when the text was already cut
    by someone else, or when the rest of the secret lies past the pre-cut margin."""
    if not text:
        return text or ""
    if extra:  # (an empty tuple, the usual `extra`, needs no copy: a header value's excerpt is per item)
        extra = [value for value in extra if value]
    if len(text) > limit + _PRE_CUT_MARGIN:
        text = text[:limit + _PRE_CUT_MARGIN]
    text = scrub_text(text, extra)
    if len(text) > limit:
        text = text[:limit]
    # With no secret registered and none given, no tail can start one.
    return _mask_cut_secret(text, extra) if extra or _REGISTERED else text


def excerpts_change_nothing(texts: Iterable[str], limit: int) -> bool:
    """True when `excerpt(text, limit)` is `text` itself for every one of `texts`: none is
    longer than `limit`, none holds what scrub_text rewrites (a URL, a `name=value` pair:
    both need "://" or "="), and no secret is registered (none to mask, no tail to check).
    Anything but a str is taken as changed (its excerpt would be of its str()).
    A caller with several short texts (a media response's headers, at every item) then
    makes no excerpt; with a secret registered it makes them all, as before."""
    if _REGISTERED:
        return False
    for text in texts:
        if type(text) is not str or len(text) > limit or "://" in text or "=" in text:
            return False
    return True


def _mask_cut_secret(text: str, extra: Iterable[str]) -> str:
    """`text` whose tail, if it is the start of a secret form, is masked (the longest such tail)."""
    if len(text) < MIN_SECRET_LENGTH:  # a start shorter than that is not masked (nor registered)
        return text
    longest = 0
    tail = text[-MIN_SECRET_LENGTH:]
    for secret in (*_REGISTERED, *extra):
        if tail not in secret:  # the excerpt's last characters lie inside any secret start it ends with
            continue
        for length in range(min(len(secret) - 1, len(text)), MIN_SECRET_LENGTH - 1, -1):
            if length > longest and text.endswith(secret[:length]):
                longest = length
                break
    return text[:-longest] + MASK if longest else text


def identity_url(url: str, signature_params: Iterable[str] = ()) -> str:
    """`url` without its signature and credential query parameters: what stays the same
    when the URL is re-signed, so what an item's identity may hash.

    Everything else is kept as written (no re-encoding, userinfo included: a URL with
    userinfo is refused, and two such must stay two rows): an unsigned URL is its own
    identity, the one it had before signatures were dropped."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.query:
        return url
    pairs = parts.query.split("&")
    kept = [pair for pair in pairs if pair and not _signs(pair, signature_params)]
    if len(kept) == len(pairs):
        return url
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join(kept), parts.fragment))


def archive_uri(url: str) -> str:
    """The URI an archive files what `url` served under: scrubbed, without signature
    parameters (they expire, and some are secrets). One function, because the export
    computes it from a row's media URL and compaction keeps it when it releases that URL:
    both must spell it the same, or a later export files the item elsewhere."""
    return identity_url(scrub_url(url))


def _signs(pair: str, signature_params: Iterable[str]) -> bool:
    name = unquote_plus(pair.split("=", 1)[0])
    return is_secret_param(name) or is_signature_param(name, signature_params)
