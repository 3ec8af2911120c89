"""Secrets never reach logs, metadata, error messages or the database.

Two layers: known secret-bearing URL parameters and cookies are removed by
name, and the values of the credential environment variables in use are
registered so any text containing them is masked wherever it came from.
"""
from __future__ import annotations

import re
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMS = frozenset({
    "access_token", "sessdata", "w_rid", "sign", "token", "upsig", "ssig", "oh", "kid", "signature",
    "appsecret_proof", "client_secret", "x-amz-signature", "x-amz-credential", "key", "auth", "password",
})
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()
_URL = re.compile(r"https?://[^\s\"'<>]+")
_COOKIE = re.compile(r"(?i)\b(SESSDATA|bili_jct|access_token|token)=([^;&\s\"']+)")


def register_secret(value: str | None) -> None:
    """Mask this exact value in every scrubbed text from now on."""
    if value and len(value) >= 6:
        with _LOCK:
            _REGISTERED.add(value)


def scrub_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrub_text_only(url)
    if not parts.query:
        return scrub_text_only(url)
    query = [(k, "REDACTED" if k.lower() in SECRET_PARAMS else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return scrub_text_only(urlunsplit(parts._replace(query=urlencode(query, safe="/:,"))))


def scrub_text(text: str) -> str:
    text = _URL.sub(lambda match: scrub_url(match.group(0)), text)
    return scrub_text_only(_COOKIE.sub(lambda m: f"{m.group(1)}=REDACTED", text))


def scrub_text_only(text: str) -> str:
    with _LOCK:
        secrets = list(_REGISTERED)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "REDACTED")
    return text
