"""The simulated world at any size (`media-crawler sim --accounts 10000 --days 30 ...`).

Chosen when any scale option is given; the demo world (media_crawler_sim/world.py) stays as it is
otherwise. Nothing is built per account up front: every account's posts and media
derive on demand from (seed, platform, account index, day, post index), ids encode
those coordinates reversibly (codec.py), and only a bounded LRU of posts is kept.

- options.py: WorldSize, the scale options and their checks;
- codec.py: seeded, invertible id scrambling;
- content.py: one post of each platform, in the demo's own dataclasses;
- world.py: BigWorld, the same interface as World over lazy sequences and maps;
- truth.py: the truth and sources.yaml, in pages or as a stream.
"""
from media_crawler_sim.scale.options import MEDIA_SIZES, WorldSize

__all__ = ["MEDIA_SIZES", "WorldSize"]
