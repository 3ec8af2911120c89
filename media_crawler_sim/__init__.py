"""The built-in platform simulator: Bilibili, Weibo (m.weibo.cn and weibo.com ajax),
Facebook Graph and URL-list feeds on 127.0.0.1, in their real paths and shapes, for a
deterministic world derived from a seed (DESIGN.md, "The built-in simulator").

    from media_crawler_sim import Simulator
    with Simulator(seed=1, port=0) as sim:
        sim.base_url  # http://127.0.0.1:PORT; /_sim/truth lists every media file

A package of its own beside the product: it imports the product's platform registry,
and of the product only the commands that run it import it (`media-crawler sim`,
media_crawler/commands/sim.py, wired to `add_arguments(parser)` and `run(args) -> int`;
`demo`; `ui`). Each platform's part comes from the entry-point group
`media_crawler_sim.platforms` (parts.py; builtin.py for the built-in four).
Layout: content/ (the world's data), api/ (answers per platform + media + test hooks),
scale/ (the generated world of any size), media.py (bytes), cdn.py (signed URLs,
Referer), faults.py, ranges.py, server.py, echo.py (the hostile profile that echoes
credentials back; off unless asked for).
"""
from media_crawler_sim.server import Simulator, add_arguments, main, run

__all__ = ["Simulator", "add_arguments", "main", "run"]
