"""Per-item failure isolation: one broken item becomes an ItemError, the rest
of the page still normalizes."""
from __future__ import annotations

from typing import Callable, Iterable

from media_crawler.errors import CrawlError, ErrorClass, FinalState
from media_crawler.models import ItemError
from media_crawler.platforms.base import FeedItem

# What malformed data raises inside a normalizer. Anything else is a bug in
# our code and should surface as such, not hide as a parse_error.
MALFORMED = (KeyError, IndexError, TypeError, ValueError, AttributeError)


def guarded(platform: str, item_id: str | None, build: Callable[[], Iterable[FeedItem]]) -> list[FeedItem]:
    """`build()` materialized, or a single ItemError when it fails.

    Materializing first matters: a generator that fails half-way must not
    leave half an item's records behind.
    """
    try:
        return list(build())
    except (CrawlError, *MALFORMED) as exc:
        return [item_failure(platform, item_id, exc)]


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
        return ItemError(platform, ErrorClass.PARSE_ERROR.value, f"{platform}: {exc}", item_id)
    raise exc
