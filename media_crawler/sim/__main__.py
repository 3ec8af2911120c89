"""`python -m media_crawler.sim --port 8787 --seed 1`: the simulator without the CLI wiring."""
import sys

from media_crawler.sim.server import main

sys.exit(main())
