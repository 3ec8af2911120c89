"""The ledger's states, named once: the ledger (ledger.py) stores them and the typed
moves between them (transitions.py) name them; neither imports the other for them.
docs/DESIGN.md draws the state machine."""
from __future__ import annotations

from media_crawler.errors import FinalState

DISCOVERED, DOWNLOADING, DOWNLOADED, VERIFIED, COMMITTED = "discovered", "downloading", "downloaded", "verified", "committed"
# A failure's final state is its error class's (errors.py): the same two words.
RETRY_WAIT, FAILED, GONE = "retry_wait", FinalState.FAILED.value, FinalState.GONE.value
FINISHED_STATES = (COMMITTED, GONE)
STATES = (DISCOVERED, DOWNLOADING, DOWNLOADED, VERIFIED, COMMITTED, RETRY_WAIT, FAILED, GONE)
