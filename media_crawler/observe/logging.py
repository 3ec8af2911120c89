"""JSON-lines logging: one object per line on stdout, for people and machines alike.

Used two ways: by the `media-crawler` commands (`configure()`), and by Dagster's
instance-wide `python_logs` handler (dagster.yaml names `JsonFormatter`), so the
framework's own events come out in the same shape as ours.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sys
from datetime import datetime, timezone

from media_crawler.observe.scrub import scrub_text

# Attributes every LogRecord has; anything else was passed as `extra=` and is ours.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
# Dagster attaches its whole event object; its type and message are all a reader needs.
_DAGSTER_NOISE = {"dagster_meta", "dagster_event", "dagster_event_batch_metadata"}
WORKER = os.environ.get("MEDIA_CRAWLER_WORKER") or f"{socket.gethostname()}-{os.getpid()}"


def utc_timestamp(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict = {
            "ts": utc_timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "worker": WORKER,
        }
        meta = getattr(record, "dagster_meta", None)
        if isinstance(meta, dict):
            # Dagster's framework events: keep the correlation ids, drop the noise.
            for key in ("run_id", "step_key", "job_name", "dagster_event_type"):
                if meta.get(key) is not None:
                    data[key if key != "step_key" else "step"] = str(meta[key])
            event = meta.get("dagster_event")
            if event is not None and getattr(event, "event_type_value", None):
                data["dagster_event_type"] = event.event_type_value
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in _DAGSTER_NOISE and not key.startswith("_"):
                data[key] = value
        try:
            data["msg"] = scrub_text(record.getMessage())
        except Exception:  # a broken %-format must not lose the event
            data["msg"] = scrub_text(str(record.msg))
        if record.exc_info:
            data["exc"] = scrub_text(self.formatException(record.exc_info))
        try:
            return json.dumps(data, ensure_ascii=False, default=str)
        except Exception:  # never let one odd value kill logging (Dagster passes exotic objects)
            return json.dumps({k: str(v) for k, v in data.items()}, ensure_ascii=False)


def configure(level: str = "INFO", stream=None) -> None:
    """JSON lines on stdout for the `media_crawler` loggers (CLI commands)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("media_crawler")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
