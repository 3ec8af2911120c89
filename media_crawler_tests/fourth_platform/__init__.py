"""A fourth platform that lives entirely in this package: `example`, a photo-album service.

It is what a third party writes to add a platform, and the contract test's proof that
nothing outside one package has to change: its spec (below), its adapter (client.py),
its pure normalizer and error table (normalize.py), its simulator part (sim.py) and
its fixtures. It is registered only through the entry point, by a test that puts a
`*.dist-info` with `entry_points.txt` on sys.path (support.py `register_example`):

    [media_crawler.platforms]
    example = media_crawler_tests.fourth_platform:SPEC

    [media_crawler_sim.platforms]
    example = media_crawler_tests.fourth_platform.sim:PART

It names no rate on purpose: a registered platform without one gets the registry's
conservative default (platform_spec.CONSERVATIVE_RATE), never an unthrottled crawl.
"""
from media_crawler.platform_spec import PlatformSpec, Setting

SPEC = PlatformSpec(
    name="example",
    adapter="media_crawler_tests.fourth_platform.client:ExampleAdapter",
    source_kinds=("album",),
    default_kind="album",
    media_hosts=("*.example-cdn.test",),
    settings=(Setting("page_size", "int", default=3, minimum=1, doc="photos per album page the API is asked for"),),
    credential=("api_key", "EXAMPLE_API_KEY"),
    normalize="media_crawler_tests.fourth_platform.normalize:detect",
    classify="media_crawler_tests.fourth_platform.normalize:classify",
)
