"""Every API answer kept as fetched, for the archive (`export --format wacz`).

The transport hands each answer here (platforms/api_get.py `keep_answer`). What is
kept: the body's bytes as the platform sent them (its Content-Encoding undone), a blob of
the answer store named by its sha256, so an answer seen twice is stored once; and in the
ledger (store/answers.py) the scrubbed URL, the time, the status line and the headers.

Secrets are scrubbed before anything is stored, because a platform may echo them back
(the simulator's echo profile does, in bodies and headers alike):
- the body by value, byte for byte (scrub.mask_secrets_in_bytes): every configured
  credential in each of its encodings, and the request's own secret values, become `***`;
  nothing else of the body changes, so what is kept is what was served, less the secrets;
- each header value through scrub_text (URLs, `name=value` credential pairs, values);
  a Set-Cookie keeps only its cookie's name (a session cookie is a secret whoever set it);
- the headers that described the transfer, not the bytes kept (Content-Encoding,
  Transfer-Encoding, Content-Length, hop-by-hop ones) are dropped: the export writes the
  length of the kept body.

An answer the store cannot take (a full disk, an unreachable bucket) is logged as not kept (`answer_not_kept`)
and the crawl goes on: the media matter more than the archive of how they were listed.
"""
from __future__ import annotations

import hashlib
import io
import threading
import time

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.observe.events import log_item
from media_crawler.platforms.api_get import FetchedAnswer
from media_crawler.scrub import MASK, encodings, mask_secrets_in_bytes, scrub_text, scrub_url
from media_crawler.store.answers import KeptAnswer, record_answer, release_mark
from media_crawler.store.blob_store import BlobStore
from media_crawler.store.ledger import Ledger

# Lower-case names of headers about the transfer rather than the kept bytes.
TRANSFER_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length", "connection", "keep-alive",
                              "proxy-connection", "trailer", "upgrade"})
# Store-then-record rounds for one answer. A compact releasing its blob meanwhile costs two
# more (its pending mark, then its released one); one that stays pending (a compact killed
# mid-sweep, until the next compact or `reconcile --repair` finishes it) ends in answer_not_kept.
KEEP_ROUNDS = 5
# The wait before round N+1 is N times this: room for the sweep to take the ledger between
# marking a blob pending and deleting it, rather than a keeper's rounds spent in that gap.
KEEP_BACKOFF_S = 0.05


class AnswerKeeper:
    def __init__(self, ledger: Ledger, store: BlobStore) -> None:
        self.ledger = ledger
        self.store = store
        self._last = threading.local()

    def last_kept(self) -> str | None:
        """The sha256 of the answer this thread kept last: for an item the adapter yields,
        the page or detail answer it was read from (the adapters fetch, then yield)."""
        return getattr(self._last, "sha256", None)

    def keep(self, answer: FetchedAnswer) -> None:
        secrets = sorted({form for value in answer.secrets for form in encodings(value)}, key=len, reverse=True)
        body = mask_secrets_in_bytes(answer.body, secrets)
        sha256 = hashlib.sha256(body).hexdigest()

        def stored() -> None:
            if not self.store.exists(sha256):  # the usual repeat (an unchanged page) costs no write
                self.store.put_stream_if_absent(io.BytesIO(body), sha256)

        kept = KeptAnswer(
            platform=answer.platform, url=scrub_url(answer.url, secrets), fetched_at=answer.fetched_at,
            status=answer.status, reason=scrub_text(answer.reason, secrets),
            headers=kept_headers(answer.headers, secrets), sha256=sha256, size=len(body))
        try:
            # The blob is stored before the row's transaction, never inside it: the row is
            # written only if `compact --answers-older-than` did not release the blob since
            # (store/answers.py), else it is stored again.
            for round_ in range(KEEP_ROUNDS):
                time.sleep(KEEP_BACKOFF_S * round_)
                mark = release_mark(self.ledger)
                stored()
                if record_answer(self.ledger, kept, stored_since=mark):
                    break
            else:
                raise CrawlError(ErrorClass.STORAGE_ERROR,
                                 f"its blob is being released by a compact ({KEEP_ROUNDS} tries)")
        except CrawlError as error:
            # The crawl goes on without this answer (its media matter more than the
            # archive of how they were listed); the line says which one was not kept.
            log_item(stage="fetch", platform=answer.platform, canonical_url=kept.url, outcome="skipped",
                     reason="answer_not_kept", error_class=error.error_class.value, message=error.message)
            return
        self._last.sha256 = sha256


def kept_headers(headers: tuple[tuple[str, str], ...], secrets: list[str]) -> tuple[tuple[str, str], ...]:
    """The answer's headers as kept: transfer headers dropped, Set-Cookie values masked,
    every other value scrubbed."""
    kept = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in TRANSFER_HEADERS:
            continue
        if lowered == "set-cookie":
            cookie_name = value.split("=", 1)[0].strip()
            value = f"{scrub_text(cookie_name, secrets)}={MASK}"
        else:
            value = scrub_text(value, secrets)
        kept.append((scrub_text(name, secrets), value))
    return tuple(kept)
