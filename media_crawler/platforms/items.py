"""Per-item failure isolation: one broken item becomes an ItemError, the rest
of the page still normalizes."""
from __future__ import annotations

import json
import math
from typing import Callable, Iterable

from media_crawler.errors import CrawlError, ErrorClass, FinalState
from media_crawler.models import ItemError, MediaRecord
from media_crawler.platforms.base import FeedItem
from media_crawler.platforms.fields import INT64_MAX, MissingField
from media_crawler.platforms.safe_json import clean_text, is_clean

# What malformed data raises inside a normalizer. Anything else is a bug in
# our code and should surface as such, not hide as a parse_error.
MALFORMED = (KeyError, IndexError, TypeError, ValueError, AttributeError)


def guarded(platform: str, item_id: str | None, build: Callable[[], Iterable[FeedItem]]) -> list[FeedItem]:
    """`build()` materialized, or a single ItemError when it fails.

    Materializing first matters: a generator that fails half-way must not
    leave half an item's records behind.
    """
    try:
        return [check_record(item) if isinstance(item, MediaRecord) else item for item in build()]
    except (CrawlError, *MALFORMED) as exc:
        return [item_failure(platform, item_id, exc)]


# The ledger's column widths (store/schema.py): a longer identity would be refused
# by PostgreSQL when the batch is written, failing the whole page instead of one item.
IDENTITY_LIMITS = {"item_id": 200, "variant": 100, "group": 200, "resolve_ref": 300}


def check_record(record: MediaRecord) -> MediaRecord:
    """`record` when every column it becomes fits the ledger; else MissingField
    (a per-item parse_error): an identity past its column, a size outside a
    BIGINT, text that is not valid UTF-8 or holds NUL, a number JSON cannot hold."""
    for name, limit in IDENTITY_LIMITS.items():
        value = getattr(record, name)
        if value is not None and len(value) > limit:
            raise MissingField(f"{name} is {len(value)} characters, more than the {limit} the ledger keeps")
    size = record.expected_size
    if size is not None and not (isinstance(size, int) and 0 <= size <= INT64_MAX):
        raise MissingField(f"expected size {size} is out of range")
    texts = [record.item_id, record.variant, record.canonical_url, record.media_url, record.group or "",
             record.resolve_ref or "", record.expected_sha256 or "", *record.backup_urls]
    for key, value in record.meta.items():
        texts.append(key)
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise MissingField(f"meta {key} is {value}")
        elif not (value is None or isinstance(value, (int, float))):
            texts.append(_json_of(key, value))
    try:
        # One scan of all the texts together (a NUL or lone surrogate in any is one in the
        # whole): a call per text was most of this check's cost on a 5,000-item list.
        clean = is_clean("".join(texts))
    except TypeError:  # a text that is not a str
        clean = False
    if not clean:
        raise MissingField("record holds text that is not valid UTF-8 (a lone surrogate) or a NUL")
    return record


def _json_of(key: str, value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise MissingField(f"meta {key} cannot be stored as JSON") from None


def is_item_level(error: CrawlError) -> bool:
    """Permanent classes (not_found, too_large, ...) end one item, not the walk.

    Everything else raised while fetching an item's details (rate limit, auth,
    network, an unreadable body) says the platform is unhappy: stop paging.
    """
    return not error.policy.retryable and error.policy.final_state is FinalState.GONE


def item_failure(platform: str, item_id: str | None, exc: Exception) -> ItemError:
    """The ItemError for a failure while fetching one item's details; re-raises
    `exc` when it must stop the walk instead. A detail whose shape drifted
    fails its item only, like a drifted item on a feed page.

    Use inside `except (CrawlError, *MALFORMED) as exc:`.
    """
    if isinstance(exc, CrawlError) and is_item_level(exc):
        return ItemError(platform, exc.error_class.value, exc.message, item_id, exc.platform_code)
    if isinstance(exc, MALFORMED):
        message = clean_text(f"{platform}: {exc}")
        return ItemError(platform, ErrorClass.PARSE_ERROR.value, message, item_id and clean_text(item_id))
    raise exc
