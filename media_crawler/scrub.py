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
# Anything else that *looks* like a credential or signature by its name.
_SECRET_NAME = re.compile(r"(token|secret|signature|passw|credential|sessdata|_sig$|^sig_)", re.IGNORECASE)
# Facebook's paging cursor is not a secret and is useful when reading logs.
_NOT_SECRET = frozenset({"__paging_token"})

_URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>]+")
_PAIR_IN_TEXT = re.compile(
    r"(?i)\b(access_token|sessdata|token|w_rid|upsig|ssig|sign|signature|sub|subp|bili_jct)=([^&;\s\"']+)")

# The variables the adapters read when sources.yaml names none (platforms/headers.py
# `credential(..., default_env)`): a secret sent by default must be masked by default.
DEFAULT_CREDENTIAL_ENVS = ("BILIBILI_SESSDATA", "FB_ACCESS_TOKEN", "WEIBO_COOKIE")

_LOCK = threading.Lock()  # serializes registrations; readers take the current tuple without it
_REGISTERED: tuple[str, ...] = ()  # longest first, so a longer form is masked before a part of it


def is_secret_param(name: str) -> bool:
    lowered = name.lower()
    if lowered in _NOT_SECRET:
        return False
    return lowered in SECRET_PARAM_NAMES or bool(_SECRET_NAME.search(lowered))


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


def register_environment_secrets(env_names: Iterable[str] = ()) -> None:
    """Mask the values of these environment variables and of the default credential ones.

    A cookie header value ("SUB=...; SUBP=...") is registered whole and part by
    part, since an error text may quote one cookie without the others.
    """
    from media_crawler.config import environment_value  # here: config imports modules that import this one

    for name in {*env_names, *DEFAULT_CREDENTIAL_ENVS}:
        value = environment_value(name)
        register_secret(value)
        for part in (value or "").split(";"):
            register_secret(part.split("=", 1)[-1].strip())


def mask_secrets(text: str, extra: Iterable[str | None] = ()) -> str:
    """`text` with every registered secret form, and every value in `extra`, masked."""
    if not text:
        return text
    for secret in _REGISTERED:
        if secret in text:
            text = text.replace(secret, MASK)
    for secret in extra:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MASK)
    return text


def scrub_url(url: str, extra: Iterable[str | None] = ()) -> str:
    """`url` without secret query parameters or userinfo, secret values masked; safe to log.

    Secrets are masked in the URL as written *and* in each decoded query value before
    the query is encoded again: re-encoding spells a value differently (`,` for `%2C`,
    `%3D` for `=`), and a spelling nobody registered would slip past the last mask."""
    url = mask_secrets(url, extra)
    if "?" in url or "@" in url:
        try:
            parts = urlsplit(url)
            netloc = parts.netloc.rsplit("@", 1)[-1]  # drop user:password@
        except ValueError:
            url = _PAIR_IN_TEXT.sub(lambda m: f"{m.group(1)}={MASK}", url)
        else:
            query = ""
            if parts.query:
                kept = [(k, mask_secrets(v, extra)) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                        if not is_secret_param(k)]
                query = urlencode(kept, safe="/:,*")
            url = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return mask_secrets(url, extra)


def scrub_text(text: str, extra: Iterable[str | None] = ()) -> str:
    """`text` with URLs scrubbed, `name=value` credential pairs masked, and every
    registered secret (and every value in `extra`) masked."""
    if not text:
        return text
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
