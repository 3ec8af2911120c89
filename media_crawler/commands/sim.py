"""`media-crawler sim`: the built-in platform simulator on 127.0.0.1.

The simulator is a package of its own (media_crawler_sim, also `python -m
media_crawler_sim`); this command, `demo` and `ui` are the only modules of the
product that import it (test_architecture.py)."""
from media_crawler_sim import add_arguments, run

__all__ = ["add_arguments", "run"]
