"""The built-in platform simulator: Bilibili, Weibo (m.weibo.cn and weibo.com ajax),
Facebook Graph and URL-list feeds on 127.0.0.1, in their real paths and shapes, for a
deterministic world derived from a seed (DESIGN.md, "The built-in simulator").

    from media_crawler_sim import Simulator
    with Simulator(seed=1, port=0) as sim:
        sim.base_url  # http://127.0.0.1:PORT; /_sim/truth lists every media file

CLI: `media-crawler sim` is wired to `add_arguments(parser)` and `run(args) -> int`.
Layout: content/ (the world's data), api/ (answers per platform + media + test hooks),
media.py (bytes), cdn.py (signed URLs, Referer), faults.py, ranges.py, server.py,
echo.py (the hostile profile that echoes credentials back; off unless asked for).
"""
from media_crawler_sim.server import Simulator, add_arguments, main, run

__all__ = ["Simulator", "add_arguments", "main", "run"]
