"""JSON-lines logging: one object per line on stdout, for people and machines alike.

Used three ways: by the `media-crawler` commands (`configure()`), by Dagster's
instance-wide `python_logs` handler (dagster.yaml names `JsonFormatter`), so the
framework's own events come out in the same shape as ours, and by the assets
(`ensure_configured()`), so item events reach stdout in a Dagster step process
without being copied into Dagster's event log (a million item lines a day would
bloat run storage; see docs/DESIGN.md).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from json.encoder import c_make_encoder, encode_basestring

from media_crawler.environment import worker_name_override
from media_crawler.observe.traces import debug_enabled, exception_summary, without_stack_trace
from media_crawler.scrub import registered_forms, scrub_text
from media_crawler.timestamps import utc_timestamp

# Attributes every LogRecord has; anything else was passed as `extra=` and is ours.
RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
# Dagster attaches its whole event object; its type and message are all a reader needs.
DAGSTER_NOISE = frozenset({"dagster_meta", "dagster_event", "dagster_event_batch_metadata"})
WORKER = worker_name_override() or f"{socket.gethostname()}-{os.getpid()}"


def _name_forked_worker() -> None:
    """A forked child (fetch-urls --processes) is a worker of its own in the logs."""
    global WORKER
    if not worker_name_override():
        WORKER = f"{socket.gethostname()}-{os.getpid()}"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_name_forked_worker)
ROOT_LOGGER = "media_crawler"


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)  # json.dumps with options builds one per call
# JSONEncoder.encode() still builds its C encoder anew per call (an eighth of an item
# line's cost): this one, with _ENCODER's options, is built once. It checks no
# circularity, so it keeps no state between calls and threads may share it; a circular
# value ends in RecursionError instead of ValueError, and in encode_line's fallback all the same.
_ENCODE = None if c_make_encoder is None else c_make_encoder(
    None, _ENCODER.default, encode_basestring, None, _ENCODER.key_separator, _ENCODER.item_separator,
    False, False, True)


class LogLag:
    """Log lag of this process: from an event's time (the record's `created`, the line's
    `ts`) to its line written to the stream. It grows when stdout blocks (a log reader
    that cannot keep up, a full pipe) or lines wait in a batch (batched_lines.py); a
    log pipeline alerting on lines sees it that much later. `progress` events carry
    the largest lag since the previous one (observe/progress.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count, self._sum, self._max = 0, 0.0, 0.0
        self.total_count, self.total_max = 0, 0.0

    def observe(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        with self._lock:
            self._count += 1
            self._sum += seconds
            self._max = max(self._max, seconds)
            self.total_count += 1
            self.total_max = max(self.total_max, seconds)

    def take(self) -> dict | None:
        """{writes, max_ms, mean_ms} since the previous take (None when nothing was written)."""
        with self._lock:
            count, total, largest = self._count, self._sum, self._max
            self._count, self._sum, self._max = 0, 0.0, 0.0
        if not count:
            return None
        return {"writes": count, "max_ms": round(largest * 1000, 1), "mean_ms": round(total / count * 1000, 2)}


    def _after_fork_in_child(self) -> None:
        """A forked writer (fetch-urls --processes) starts with a fresh lock: one another
        thread held at the fork would never be released in the child."""
        self._lock = threading.Lock()
        self._count, self._sum, self._max = 0, 0.0, 0.0


LOG_LAG = LogLag()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LOG_LAG._after_fork_in_child)
# Set on records whose strings were all scrubbed already (observe/events.py's item
# lines), so the formatter need not scrub them a second time.
PRE_SCRUBBED = "_mc_scrubbed"


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
        scrubbed = getattr(record, PRE_SCRUBBED, False)
        for key, value in vars(record).items():
            if key not in RECORD_ATTRIBUTES and key not in DAGSTER_NOISE and not key.startswith("_"):
                # Extras from any logger (not only log_item) may quote a URL or a header.
                data[key] = scrub_text(value) if isinstance(value, str) and not scrubbed else value
        try:
            data["msg"] = shown_message(record.getMessage())
        except Exception:  # a broken %-format must not lose the event
            data["msg"] = shown_message(str(record.msg))
        if record.exc_info:
            formatted = self.formatException(record.exc_info)
            data["exc"] = scrub_text(formatted if debug_enabled() else exception_summary(formatted))
        return encode_line(data)

    def format_fields(self, created: float, levelname: str, name: str, fields: dict, message: str) -> str:
        """What format() makes of a record of logger `name` with `message` and `fields` as its
        extras, every string among them scrubbed already, without an exception or a Dagster
        event (observe/events.py's item lines, which skip the record): the same line, key for key."""
        return encode_line({"ts": utc_timestamp(created), "level": levelname.lower(), "logger": name,
                            "worker": WORKER, **fields, "msg": _shown_again(message)})


def shown_message(text: str) -> str:
    """A line's `msg`: scrubbed, and without Dagster's stack trace unless MEDIA_CRAWLER_DEBUG=1.
    The environment is only asked when there is a trace to cut: most messages have none."""
    text = scrub_text(text)
    short = without_stack_trace(text)
    return text if short == text or debug_enabled() else short


# The `msg` of messages said again and again ("download ok"): kept while the registered
# secrets stay the same (scrub.registered_forms), at most _SHOWN_KEPT of them.
_shown_kept: tuple[tuple[str, ...], dict[str, str]] = ((), {})
_SHOWN_KEPT = 256


def _shown_again(text: str) -> str:
    """shown_message(text), kept for the next time unless it had a trace to cut (the debug
    switch decides that line by line)."""
    global _shown_kept
    registered, kept = _shown_kept  # one tuple: a thread sees the old pair or the new one
    if registered is not registered_forms():
        registered, kept = _shown_kept = registered_forms(), {}
    shown = kept.get(text)
    if shown is None:
        shown = scrub_text(text)
        if without_stack_trace(shown) != shown:
            return shown_message(text)
        if len(kept) < _SHOWN_KEPT:
            kept[text] = shown
    return shown


def encode_line(data: dict) -> str:
    try:
        return _ENCODER.encode(data) if _ENCODE is None else "".join(_ENCODE(data, 0))
    except Exception:  # never let one odd value kill logging (Dagster passes exotic objects)
        return json.dumps({k: scrub_text(str(v)) for k, v in data.items()}, ensure_ascii=False)


class MeasuredStreamHandler(logging.StreamHandler):
    """A StreamHandler that measures each line's log lag (LOG_LAG) once written. A stream
    that buffers lines itself (batched_lines.BatchedLines, `measures_lag`) measures them
    when it writes them instead."""

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if not getattr(self.stream, "measures_lag", False):
            LOG_LAG.observe(time.time() - record.created)

    def emit_fields(self, created: float, levelno: int, name: str, fields: dict, message: str) -> None:
        """handle() of the record JsonFormatter.format_fields() describes, without making it (the
        record and the handler chain were two fifths of an item line's cost): under the handler's
        lock the line is written and flushed (unless the stream flushes itself) and its log lag
        measured, as emit() does; should that fail, handleError() gets the record after all."""
        with self.lock:  # what Handler.acquire() takes
            stream = self.stream
            try:
                line = self.formatter.format_fields(created, logging.getLevelName(levelno), name, fields, message)
                stream.write(line + self.terminator)
                if not getattr(stream, "flushes_itself", False):
                    self.flush()
            except RecursionError:  # as StreamHandler.emit
                raise
            except Exception:
                record = logging.getLogger(name).makeRecord(name, levelno, __name__, 0, message, (), None,
                                                            extra={**fields, PRE_SCRUBBED: True})
                record.created = created
                self.handleError(record)
            if not getattr(stream, "measures_lag", False):
                LOG_LAG.observe(time.time() - created)


class CurrentStdoutHandler(MeasuredStreamHandler):
    """Writes to whatever `sys.stdout` is at emit time, not at creation.

    A handler that kept the stream it was built with would keep writing to a
    closed capture after `contextlib.redirect_stdout` (the demo) or a test
    runner swapped stdout, and Dagster's own handler resolves `ext://sys.stdout`
    per run: resolving late keeps both streams the same.
    """

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property
    def stream(self):  # noqa: D401 - logging's attribute
        return sys.stdout

    @stream.setter
    def stream(self, _value) -> None:
        pass  # always the current sys.stdout


_OUR_HANDLERS = (MeasuredStreamHandler, CurrentStdoutHandler)


def sole_json_handler(logger: logging.Logger, levelno: int) -> MeasuredStreamHandler | None:
    """The handler a record of `logger` at `levelno` would reach when it is the only one, one of
    configure()'s (on `logger`'s parent, which does not propagate): its emit_fields() then writes
    what handling the record would. None for any other set-up, where only the record will do:
    a handler or filter added anywhere on the way (Dagster's managed loggers, a test's caplog),
    a formatter of another class, propagation to the root logger, a disabled logger."""
    if logger.handlers or logger.filters or logger.disabled or not logger.propagate:
        return None
    parent = logger.parent
    if parent is None or parent.propagate or parent.filters:
        return None
    try:
        (handler,) = parent.handlers  # one step: another thread may be swapping them
    except ValueError:
        return None
    if (type(handler) not in _OUR_HANDLERS or handler.filters or levelno < handler.level
            or type(handler.formatter) is not JsonFormatter):
        return None
    return handler


def configure(level: str = "INFO", stream=None) -> None:
    """JSON lines for the `media_crawler` loggers (CLI commands): on `stream`, else the current stdout."""
    handler = MeasuredStreamHandler(stream) if stream is not None else CurrentStdoutHandler()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(ROOT_LOGGER)
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


def ensure_configured(level: str = "INFO") -> None:
    """Give the `media_crawler` loggers a JSON stdout handler unless a command already chose one.

    Dagster step processes import the code location without running our CLI,
    and the instance's python_logs handler only sees Dagster's own loggers
    unless `managed_python_loggers` names ours, which would also copy every
    item line into the event log. So the assets call this once per step.
    """
    logger = logging.getLogger(ROOT_LOGGER)
    if not logger.handlers:
        configure(level)
