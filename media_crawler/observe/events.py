"""Per-item stage events: the JSON log lines an operator greps at night.

Every line has the same keys (ITEM_KEYS, null where a stage cannot know one),
so `jq 'select(.outcome=="failed")'` and log pipelines never meet a missing key.
Correlation ids (run_id, partition, step) come from a context variable the
Dagster layer sets once per step, so domain code does not pass them around.
"""
from __future__ import annotations

import contextvars
import logging
import time
from typing import Any

from media_crawler.observe.logging import DAGSTER_NOISE, PRE_SCRUBBED, RECORD_ATTRIBUTES, sole_json_handler
from media_crawler.scrub import scrub_text, scrub_url

ITEM_LOG = logging.getLogger("media_crawler.items")
STAGES = ("fetch", "download", "verify", "commit")
CORRELATION_KEYS = ("run_id", "partition", "step")
# Present on every item line; ts, level and worker come from the formatter.
ITEM_KEYS = ("task_id", "platform", "stage", "canonical_url", "attempt", "duration_ms", "outcome",
             *CORRELATION_KEYS)
# Outcomes that are not failures log at info; everything else at warning.
QUIET_OUTCOMES = frozenset({"ok", "skipped", "deferred", "progress"})
# The ids as every line shows them (run_id, partition and step first, None where unset),
# and whether the formatter would show each of them as it is: a name it reserves or
# drops sends the line through a record (log_item).
_NO_IDS: tuple[dict[str, Any], bool] = (dict.fromkeys(CORRELATION_KEYS), True)
_CORRELATION: contextvars.ContextVar[tuple[dict[str, Any], bool]] = contextvars.ContextVar(
    "media_crawler_correlation", default=_NO_IDS)


class correlation:  # noqa: N801 - used as a function: `with correlation(run_id=...):`
    """The ids every item line logged inside names (None values leave an outer one as it is).

    A class rather than a @contextmanager generator: fetch-urls' workers enter one twice
    per item, and the generator's machinery cost more than setting the variable."""

    __slots__ = ("_ids", "_token")

    def __init__(self, **ids: Any) -> None:
        self._ids = ids

    def __enter__(self) -> None:
        outer, outer_plain = _CORRELATION.get()
        added = {key: value for key, value in self._ids.items() if value is not None}
        if added:  # (never changed in place: an outer dict is shared as it is)
            outer, outer_plain = {**outer, **added}, outer_plain and all(map(_plain_field, added))
        self._token = _CORRELATION.set((outer, outer_plain))

    def __exit__(self, *_exc: object) -> None:
        _CORRELATION.reset(self._token)


def current_correlation() -> dict[str, Any]:
    """run_id, partition and step (None outside a Dagster step)."""
    return dict(_CORRELATION.get()[0])


def _plain_field(key: str) -> bool:
    """A field the JSON formatter shows under its own name, and a record accepts."""
    return key not in RECORD_ATTRIBUTES and key not in DAGSTER_NOISE and not key.startswith("_")


def task_ref(task_id: int | str | None) -> str | None:
    """The ledger row id as logs show it (`t_8812`): greppable, and not mistaken for a count."""
    if task_id is None or (isinstance(task_id, str) and task_id.startswith("t_")):
        return task_id
    return f"t_{task_id}"


def _add_fields(line: dict[str, Any], fields: dict[str, Any]) -> bool:
    """`fields` added to `line` as log_item adds them: None left out, strings scrubbed, a name
    LogRecord reserves renamed. False when one is a name the formatter drops or reads
    (DAGSTER_NOISE, `_...`): such a line must go through a record."""
    plain = True
    for key, value in fields.items():
        if value is None:
            continue
        if key in RECORD_ATTRIBUTES:  # LogRecord refuses extras that shadow its own attributes
            key = f"error_{key}" if key == "message" else f"field_{key}"
        elif key in DAGSTER_NOISE or key.startswith("_"):  # the formatter drops (or reads) these: leave it to it
            plain = False
        elif len(_PLAIN_KEYS) < _PLAIN_KEYS_KEPT:
            _PLAIN_KEYS.add(key)
        line[key] = scrub_text(value) if isinstance(value, str) else value
    return plain


def one_line_for_stages(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The log_item fields of one line that stands for several stages of one item, in order
    (fetch-urls settles an item in its download worker: download, verify, commit).

    `stage` and `outcome` are those of the last stage reached, so a committed item reads
    `commit ok` and one refused by verification `verify failed` with its error_class;
    each stage's outcome and duration are kept under its name (`download: "ok"`,
    `download_ms`), duration_ms is their sum, and a later stage's fields win over an
    earlier one's (attempt, bytes, the commit's sha256).
    """
    merged: dict[str, Any] = {}
    total_ms = 0.0
    for fields in lines:
        stage, outcome, duration = fields["stage"], fields["outcome"], fields.get("duration_ms")
        if None in fields.values():  # (a None must not replace an earlier stage's value)
            fields = {key: value for key, value in fields.items() if value is not None}
        merged.update(fields)
        merged[stage] = outcome
        if duration is not None:
            merged[f"{stage}_ms"] = round(duration, 1)
            total_ms += duration
    merged["duration_ms"] = total_ms
    return merged


def log_item(*, stage: str, platform: str, canonical_url: str, outcome: str, task_id: int | str | None = None,
             attempt: int | None = None, duration_ms: float | None = None, **fields: Any) -> None:
    """One line per item per stage. Failures log at warning, the rest at info.

    task_id, attempt and duration_ms are in every line (null when unknown).
    Other keyword fields are added as they are (None values are left out);
    error_class (failures and retries) and bytes (where known) come first.
    """
    _log_line(stage, platform, canonical_url, outcome, task_id, attempt, duration_ms, fields)


def log_stages(lines: list[dict[str, Any]]) -> None:
    """log_item(**one_line_for_stages(lines)): the line fetch-urls logs per item, its fields
    handed over as the dict they are. Spread into keywords, each of the dozen beyond
    log_item's parameters was compared with every parameter's name before landing in a
    new dict: a tenth of the line's cost."""
    fields = one_line_for_stages(lines)
    _log_line(fields.pop("stage"), fields.pop("platform"), fields.pop("canonical_url"), fields.pop("outcome"),
              fields.pop("task_id", None), fields.pop("attempt", None), fields.pop("duration_ms", None), fields)


# Field names met before that a line shows as they are (_plain_field): the few dozen the
# code passes, so the set stops growing long before _PLAIN_KEYS_KEPT.
_PLAIN_KEYS: set[str] = set()
_PLAIN_KEYS_KEPT = 1024


def _log_line(stage: str, platform: str, canonical_url: str, outcome: str, task_id: int | str | None,
              attempt: int | None, duration_ms: float | None, fields: dict[str, Any]) -> None:
    """log_item's line; `fields` (the other keyword fields, a dict of the caller's own) is consumed."""
    level = logging.INFO if outcome in QUIET_OUTCOMES else logging.WARNING
    if not ITEM_LOG.isEnabledFor(level):
        return
    ids, plain = _CORRELATION.get()
    line: dict[str, Any] = {
        **ids, "task_id": task_ref(task_id), "platform": platform, "stage": stage,
        "canonical_url": scrub_url(canonical_url), "attempt": attempt,
        "duration_ms": None if duration_ms is None else round(duration_ms, 1), "outcome": outcome,
    }
    error_class, size = fields.pop("error_class", None), fields.pop("bytes", None)
    if error_class is not None:
        line["error_class"] = str(error_class)  # a class's plain name, whether given as a str or an ErrorClass
    if size is not None:
        line["bytes"] = size
    if _PLAIN_KEYS.issuperset(fields):  # every name one met before, shown as it is: only the values to see to
        for key, value in fields.items():
            if value is not None:
                line[key] = scrub_text(value) if isinstance(value, str) else value
    elif not _add_fields(line, fields):
        plain = False
    message = f"{stage} {outcome}"
    # With configure()'s handler alone in the way (fetch-urls, a Dagster step's stdout),
    # the line is written without a record: LogRecord, the handler chain and the
    # formatter's walk over the record's attributes were most of the line's cost.
    handler = sole_json_handler(ITEM_LOG, level) if plain else None
    if handler is not None:
        handler.emit_fields(time.time(), level, ITEM_LOG.name, line, message)
        return
    # Logger.log() would walk the stack for the caller's file and line, which
    # the JSON line does not show: at thousands of items a second that walk
    # was a tenth of the process's time. The record goes through the same
    # handle(): filters, handlers and pytest's caplog see it as usual.
    line[PRE_SCRUBBED] = True
    ITEM_LOG.handle(ITEM_LOG.makeRecord(ITEM_LOG.name, level, __name__, 0, message, (), None, extra=line))
