"""Secrets never reach logs, metadata, error messages or the database.

Two layers: known secret-bearing URL parameters and cookies are removed by
name (platforms/scrub.py), and the values of the credential environment variables in use are
registered so any text containing them is masked wherever it came from.
"""
from __future__ import annotations

import os
import threading
from typing import Iterable

# The name-based layer (which query parameters carry credentials or signatures)
# lives with the adapters, which use it on every API URL they touch.
from media_crawler.platforms import scrub as params

# The variables the adapters read when sources.yaml names none (platforms/headers.py
# `credential(..., default_env)`): a secret sent by default must be masked by default.
DEFAULT_CREDENTIAL_ENVS = ("BILIBILI_SESSDATA", "FB_ACCESS_TOKEN", "WEIBO_COOKIE")
_LOCK = threading.Lock()  # serializes registrations; readers take the current tuple without it
_REGISTERED: tuple[str, ...] = ()


def register_secret(value: str | None) -> None:
    """Mask this exact value in every scrubbed text from now on."""
    global _REGISTERED
    if value and len(value) >= 6:
        with _LOCK:
            if value not in _REGISTERED:
                # A new tuple, never an update in place: a reader on another
                # thread sees the old set or the new one, whole.
                _REGISTERED = (*_REGISTERED, value)


def register_environment_secrets(env_names: Iterable[str] = ()) -> None:
    """Mask the values of these environment variables and of the default credential ones.

    A cookie header value ("SUB=...; SUBP=...") is registered whole and part by
    part, since an error text may quote one cookie without the others.
    """
    for name in {*env_names, *DEFAULT_CREDENTIAL_ENVS}:
        value = os.environ.get(name)
        register_secret(value)
        for part in (value or "").split(";"):
            register_secret(part.split("=", 1)[-1].strip())


def scrub_url(url: str) -> str:
    """Secret parameters removed by name (platforms/scrub.py), registered values masked."""
    return scrub_text_only(params.scrub_url(url))


def scrub_text(text: str) -> str:
    """URLs scrubbed, credential pairs and registered secret values masked."""
    return params.scrub_text(text, _REGISTERED)


def scrub_text_only(text: str) -> str:
    for secret in _REGISTERED:
        if secret in text:
            text = text.replace(secret, params.MASK)
    return text
