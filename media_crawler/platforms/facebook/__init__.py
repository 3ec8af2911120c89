"""Facebook: a page's posts and videos through the Graph API."""
from media_crawler.platform_spec import PlatformSpec

SPEC = PlatformSpec(
    name="facebook",
    adapter="media_crawler.platforms.facebook.client:FacebookAdapter",
    source_kinds=("page",),
    default_kind="page",
    # The page's posts (default: their photo and video attachments) or its /videos edge.
    source_options=(("edge", ("posts", "videos")),),
    rate=5.0,
    burst=10.0,
    media_hosts=("*.fbcdn.net",),
    credential=("access_token", "FB_ACCESS_TOKEN"),
    signature_params=("oh", "oe"),  # fbcdn's hash and expiry: a re-signed URL is the same file
    normalize="media_crawler.platforms.facebook.detect:normalize",
    classify="media_crawler.platforms.facebook.errors:classify_answer",
    # Graph reports how close the app is to its limits on every answer: slow down before it refuses.
    on_response="media_crawler.platforms.facebook.usage:heed_usage_headers",
)
