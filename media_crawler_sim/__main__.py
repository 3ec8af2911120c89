"""`python -m media_crawler_sim --port 8787 --seed 1`: the simulator without the CLI wiring."""
import sys

from media_crawler_sim.server import main

sys.exit(main())
