"""The CDN: media bytes under /media, with what resumable, verifying downloaders need
(Content-Length, ETag, Last-Modified, Range -> 206/416, If-Range, If-None-Match, HEAD)
and what makes them earn it (signature/expiry/Referer 403s, planned and random faults,
latency).

Order of checks, as on a real CDN: unknown path 404, access rules 403, then faults,
then the bytes.
"""
from __future__ import annotations

import time
from email.utils import formatdate

from media_crawler_sim import faults
from media_crawler_sim.catalog import MediaFile
from media_crawler_sim.cdn import CdnRules
from media_crawler_sim.exchange import Request, Response, not_found, text_response
from media_crawler_sim.faults import FaultBook
from media_crawler_sim.ranges import Unsatisfiable, requested_range
from media_crawler_sim.world import World

# One fixed Last-Modified for everything: media never change within a world.
LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)
HTML_INSTEAD_OF_MEDIA = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Sign in</title></head>
<body><h1>Please sign in to continue</h1><form action="/login"><input name="user"></form></body></html>
"""
_FAULT_ANSWERS = {
    faults.NOT_FOUND: (404, "404 Not Found\n", {}),
    faults.SERVER_ERROR: (500, "500 Internal Server Error\n", {}),
    faults.RATE_LIMITED_ONCE: (429, "429 Too Many Requests\n", {"Retry-After": "1"}),
    faults.UNAVAILABLE: (503, "503 Service Unavailable\n", {"Retry-After": "1"}),
}


class MediaFiles:
    prefix = "/media"

    def __init__(self, world: World, cdn: CdnRules, fault_book: FaultBook, latency_ms: float = 0.0) -> None:
        self.world, self.cdn, self.fault_book = world, cdn, fault_book
        self.latency_s = latency_ms / 1000.0

    def handle(self, request: Request, subpath: str) -> Response:
        file = self.world.catalog.lookup(request.path)
        if file is None:
            return not_found(request.path)
        refusal = self.cdn.refusal(file, dict(request.pairs), request.headers)
        if refusal is not None:
            return text_response(403, f"403 Forbidden: {refusal}\n", "text/html; charset=utf-8")
        outage = self.fault_book.outage(file.platform)
        if outage:  # a platform-wide outage (POST /_sim/faults) wins over per-file faults
            return text_response(outage, f"{outage} platform outage (simulated)\n")
        if request.method == "GET":
            fault = self.fault_book.next_fault(request.path)
        else:
            fault = self.fault_book.standing_fault(request.path)
        if self.latency_s:
            time.sleep(self.latency_s)
        if fault in _FAULT_ANSWERS:
            status, text, headers = _FAULT_ANSWERS[fault]
            return text_response(status, text, headers=headers)
        if fault == faults.HTML_PAGE:
            return Response(200, HTML_INSTEAD_OF_MEDIA, {"Content-Type": "text/html; charset=utf-8"})
        answer = self._bytes(request, file)
        if fault == faults.CUT_ONCE and answer.body:
            answer.cut_after = len(answer.body) // 2
        return answer

    def _bytes(self, request: Request, file: MediaFile) -> Response:
        data = self.world.catalog.content(file)
        etag = f'"{self.world.catalog.sha256(file)[:32]}"'
        headers = {
            "Content-Type": file.mime,
            "ETag": etag,
            "Last-Modified": LAST_MODIFIED,
            "Accept-Ranges": "bytes",
            "Cache-Control": "max-age=31536000",
        }
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match and (if_none_match.strip() == "*" or etag in if_none_match):
            return Response(304, b"", {key: headers[key] for key in ("ETag", "Last-Modified")})
        try:
            wanted = requested_range(
                request.headers.get("Range"), request.headers.get("If-Range"), etag, LAST_MODIFIED, len(data)
            )
        except Unsatisfiable:
            return Response(416, b"", {"Content-Range": f"bytes */{len(data)}", "Content-Type": file.mime})
        if wanted is None:
            return Response(200, data, headers)
        headers["Content-Range"] = wanted.content_range(len(data))
        return Response(206, data[wanted.start : wanted.end + 1], headers)
