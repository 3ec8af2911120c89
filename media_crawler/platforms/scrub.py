"""Secret scrubbing for anything an adapter lets out: URLs in ApiResponse, error
messages, raw bodies kept for parse errors.

Two layers: query parameters whose *name* says they carry a credential or a
signature are removed from URLs, and caller-supplied secret *values* (the
Facebook token, the SESSDATA cookie) are masked wherever they appear in text.
"""
from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

# Exact names (lower-case) seen on the three platforms and their CDNs.
SECRET_PARAM_NAMES = frozenset(
    {
        "access_token", "sessdata", "w_rid", "sign", "token", "upsig", "ssig", "oh", "sig",
        "signature", "appsecret_proof", "client_secret", "password", "api_key", "apikey",
        "x-amz-signature", "x-amz-credential", "x-amz-security-token", "auth",
    }
)
# Anything else that *looks* like a credential or signature by its name.
_SECRET_NAME = re.compile(r"(token|secret|signature|passw|credential|sessdata|_sig$|^sig_)", re.IGNORECASE)
# Facebook's paging cursor is not a secret and is useful when reading logs.
_NOT_SECRET = frozenset({"__paging_token"})

_URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>]+")
_PAIR_IN_TEXT = re.compile(r"(?i)\b(access_token|sessdata|token|w_rid|upsig|ssig|sign|signature)=([^&;\s\"']+)")


def is_secret_param(name: str) -> bool:
    lowered = name.lower()
    if lowered in _NOT_SECRET:
        return False
    return lowered in SECRET_PARAM_NAMES or bool(_SECRET_NAME.search(lowered))


def scrub_url(url: str) -> str:
    """`url` without secret query parameters or userinfo; safe to log."""
    if "?" not in url and "@" not in url:
        return url  # no query and no userinfo: nothing to remove (most media URLs; called per log line)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]  # drop user:password@
    except ValueError:
        return _PAIR_IN_TEXT.sub(lambda m: f"{m.group(1)}={MASK}", url)
    if parts.query:
        kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_param(k)]
        query = urlencode(kept, safe="/:,")
    else:
        query = ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with URLs scrubbed, `name=value` credential pairs masked, and
    every given secret value masked (values shorter than 4 characters are
    ignored: masking "a" would mangle the whole text without protecting anything)."""
    if not text:
        return text
    # The substring tests skip the regular expressions for the usual text
    # (a stage name, an error sentence): both patterns need "://" or "=".
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda match: scrub_url(match.group(0)), text)
    if "=" in text:
        text = _PAIR_IN_TEXT.sub(lambda m: f"{m.group(1)}={MASK}", text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    return text


def secret_values(params: dict | None) -> list[str]:
    """The values of secret-named params: what to mask in an exception text
    that may quote the request URL."""
    return [str(v) for k, v in (params or {}).items() if is_secret_param(str(k)) and v]
