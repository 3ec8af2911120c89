"""Plain URL lists: a JSON feed of media URLs (`urls: https://host/feed.json`)."""
from media_crawler.platform_spec import PlatformSpec

SPEC = PlatformSpec(
    name="urls",
    adapter="media_crawler.platforms.urls.client:UrlsAdapter",
    source_kinds=("feed",),
    default_kind="feed",
    whole_ident=True,  # the entry is the feed URL
    hashed_key=True,  # a URL makes no readable key: urls-<sha256[:10]>
    # A plain URL list has no platform to protect: unlimited unless `platforms.urls.rate` is set.
    unlimited=True,
    # Any public host; an internal one, the feed's own included, only when `allow_hosts` lists it.
    media_hosts=("*",),
    normalize="media_crawler.platforms.urls.detect:normalize",
    classify="media_crawler.platforms.urls.normalize:classify_feed",
    # Feed pages are public JSON documents: urllib3, not requests (fetch-urls' start-up, issue 31).
    plain_api=True,
)
