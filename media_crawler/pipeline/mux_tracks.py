"""The commit stage's last step for DASH videos: a group's committed video and
audio tracks muxed into one MP4 (ffmpeg, stream copy) and committed as one
more blob, with a ledger row of its own (variant `mux`, the tracks' group).

The tracks are the archive and the muxed file a convenience. So muxing turned
off (`platforms.<name>.mux: false`, a key of the platforms with DASH videos) or no
ffmpeg on PATH is a reason, reported once per partition in the stage's metadata
and log, and an ffmpeg that rejects a group's tracks is a warning for that group,
tried again on the next run: neither fails the partition or touches the tracks.

Crash safety: the row is written after the blob is committed, and ffmpeg runs
with bitexact output, so a run that died in between makes the same bytes again
and the store keeps one copy.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Iterable

from media_crawler.download.dash import find_ffmpeg, mux, mux_unavailable_reason
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow
from media_crawler.observe.events import log_item
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.scope import Sources, source_keys
from media_crawler.store.blob_store import file_sha256
from media_crawler.store.ledger import COMMITTED, MUX_VARIANT, Task
from media_crawler.verify.verify import verify_file


def mux_partition(runtime: Runtime, sources: Sources, window: DayWindow, report: StageReport) -> None:
    """Mux every group of the partition whose tracks are committed and that has no muxed row yet.

    Adds to `report.extra`: `items_muxed`, `mux_failed` and, when muxing cannot
    run, `mux_unavailable` (the reason).
    """
    pairs = list(_unmuxed_pairs(runtime.ledger.tasks(source_key=source_keys(sources), day=window.day.isoformat())))
    if not pairs:
        return
    platform = pairs[0][0].platform  # a scope holds one platform's sources (a shard is per platform)
    # `mux` is a setting of the platforms whose adapters yield DASH tracks (their specs
    # declare it); one that does not declare it has its groups muxed.
    enabled = runtime.config.settings_for(platform).options.get("mux", True) is True
    ffmpeg = find_ffmpeg() if enabled else None
    reason = mux_unavailable_reason(enabled, ffmpeg)
    if reason is not None:
        report.extra["mux_unavailable"] = reason
        log_item(stage="commit", platform=platform, canonical_url=pairs[0][0].canonical_url,
                 outcome="skipped", reason="mux_unavailable", message=reason, groups=len(pairs))
        return
    muxed = failed = 0
    for video, audio in pairs:
        if _mux_pair(runtime, video, audio, ffmpeg):
            muxed += 1
        else:
            failed += 1
    report.extra["items_muxed"] = muxed
    report.extra["mux_failed"] = failed


def _unmuxed_pairs(tasks: Iterable[Task]) -> Iterable[tuple[Task, Task]]:
    """(video, audio) of each DASH group whose tracks are committed and that has no `mux` row."""
    groups: dict[tuple[str, str], dict[str, list[Task]]] = {}
    for task in tasks:
        if task.group_key is None:
            continue
        group = groups.setdefault((task.platform, task.item_id), {"video": [], "audio": [], "mux": []})
        if task.variant == MUX_VARIANT:
            group["mux"].append(task)
        elif task.state == COMMITTED and task.kind in ("video", "audio") and task.variant.startswith(f"{task.kind}-"):
            group[task.kind].append(task)
    for group in groups.values():
        if group["video"] and group["audio"] and not group["mux"]:
            # A selection that changed between runs can leave two qualities committed: the best of each.
            yield max(group["video"], key=_quality), max(group["audio"], key=_quality)


def _quality(task: Task) -> tuple:
    return (task.meta.get("height") or 0, task.meta.get("bandwidth") or 0, task.id)


def _mux_pair(runtime: Runtime, video: Task, audio: Task, ffmpeg: str) -> bool:
    store = runtime.store
    # From the ledger id, like every staging name, and the process: two runs of one
    # partition at once (a retry beside a live run) must not write one file.
    staged = store.staging_path(f"mux-{video.id}-{os.getpid()}")
    started = time.monotonic()
    canonical_url = f"{video.canonical_url.split('#', 1)[0]}#{MUX_VARIANT}"
    try:
        # The muxed file is about as large as both tracks: never let it take the
        # store below the free space the downloads keep (ENOSPC would reach us as
        # an ffmpeg failure, misclassified).
        needed = (video.size or 0) + (audio.size or 0) + runtime.config.min_free_bytes
        free = store.free_bytes()
        if free < needed:
            raise CrawlError(ErrorClass.DISK_FULL, f"muxing needs {needed} bytes free in the store, {free} are")
        for track in (video, audio):
            if not store.exists(track.sha256):  # lost: this group waits (reconcile re-queues it), not the partition
                raise CrawlError(ErrorClass.STORAGE_ERROR, f"the {track.kind} track is not in the store")
        with store.local_file(video.sha256) as video_file, store.local_file(audio.sha256) as audio_file:
            mux(video_file, audio_file, staged, ffmpeg=ffmpeg)
        verify_file(staged, kind="video")
        digest = file_sha256(staged)
        stored = store.put_if_absent(staged, digest, verify_hash=False)
    except CrawlError as error:
        staged.unlink(missing_ok=True)
        log_item(stage="commit", platform=video.platform, canonical_url=canonical_url, outcome="failed",
                 error_class=error.error_class.value, message=error.message,
                 duration_ms=(time.monotonic() - started) * 1000)
        return False
    # No media URL: the row is never downloaded (reconcile drops it if its blob is lost).
    record = replace(video.as_record(), variant=MUX_VARIANT, canonical_url=canonical_url, media_url="",
                     backup_urls=(), resolve_ref=None, expected_sha256=None, expected_size=None,
                     meta={**video.meta, "muxed_from": [video.variant, audio.variant],
                           "video_sha256": video.sha256, "audio_sha256": audio.sha256})
    runtime.ledger.insert_committed(record, source_key=video.source_key, day=video.day, sha256=digest,
                                    size=stored.size)
    log_item(stage="commit", platform=video.platform, canonical_url=canonical_url, outcome="ok", sha256=digest,
             bytes=stored.size, deduplicated=not stored.created, duration_ms=(time.monotonic() - started) * 1000)
    return True
