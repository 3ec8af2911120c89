"""Facebook's rate-usage headers → a 0-100 pressure and a suggested delay.

Graph answers carry how much of each limit the app has used, in percent:
- `x-app-usage: {"call_count":28,"total_cputime":25,"total_time":25}`
- `x-business-use-case-usage: {"<id>":[{"type":"pages","call_count":100,...,
   "estimated_time_to_regain_access":19}]}` (minutes)
- `x-ad-account-usage: {"acc_id_util_pct":9.67,"reset_time_duration":0}` (seconds)
The rate budget (`after_response` hook) uses the pressure to slow down
*before* the platform starts answering code 4/17/32/80001.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from media_crawler.platforms.fields import as_float
from media_crawler.platforms.responses import header
from media_crawler.platforms.safe_json import loads

USAGE_FIELDS = ("call_count", "total_cputime", "total_time")
SLOWDOWN_FROM = 50.0  # below this share of a limit, no delay
MAX_DELAY_S = 60.0  # at 100% without a regain estimate


@dataclass(frozen=True)
class UsagePressure:
    pressure: float  # 0-100: the highest share of any limit in use
    delay_s: float  # suggested pause before the next request

    @property
    def exhausted(self) -> bool:
        return self.pressure >= 100


def usage_from_headers(headers: Mapping[str, str] | None) -> UsagePressure | None:
    """None when the answer carries no readable usage header."""
    shares: list[float] = []
    regain_s = 0.0
    app = _json_header(headers, "x-app-usage")
    if isinstance(app, Mapping):
        shares += _shares(app)
    business = _json_header(headers, "x-business-use-case-usage")
    if isinstance(business, Mapping):
        for entries in business.values():
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, Mapping):
                    shares += _shares(entry)
                    regain_s = max(regain_s, (as_float(entry.get("estimated_time_to_regain_access")) or 0) * 60)
    account = _json_header(headers, "x-ad-account-usage")
    if isinstance(account, Mapping):
        share = as_float(account.get("acc_id_util_pct"))
        shares += [share] if share is not None else []
        regain_s = max(regain_s, as_float(account.get("reset_time_duration")) or 0)
    if not shares and not regain_s:
        return None
    pressure = min(max(shares, default=0.0), 100.0)
    return UsagePressure(pressure, suggested_delay(pressure, regain_s))


def heed_usage_headers(budget, platform: str, response) -> None:
    """The spec's response hook: slow the platform's shared rate budget while the
    usage headers report more than SLOWDOWN_FROM percent of a limit in use."""
    usage = usage_from_headers(response.headers)
    if usage is not None and usage.pressure > SLOWDOWN_FROM:
        factor = max(0.1, 1.0 - usage.pressure / 100.0)
        budget.penalize(platform, factor=factor, seconds=max(60.0, usage.delay_s))


def suggested_delay(pressure: float, regain_s: float = 0.0) -> float:
    """0 below 50%, rising quadratically to MAX_DELAY_S at 100%; a platform
    estimate of when access returns wins once it is given."""
    if regain_s > 0:
        return regain_s
    if pressure <= SLOWDOWN_FROM:
        return 0.0
    fraction = min((pressure - SLOWDOWN_FROM) / (100.0 - SLOWDOWN_FROM), 1.0)
    return round(MAX_DELAY_S * fraction * fraction, 3)


def _shares(values: Mapping[str, Any]) -> list[float]:
    return [share for share in (as_float(values.get(name)) for name in USAGE_FIELDS) if share is not None]


def _json_header(headers: Mapping[str, str] | None, name: str) -> Any:
    text = header(headers, name)
    if not text:
        return None
    try:
        return loads(text)
    except (ValueError, TypeError):
        return None  # malformed usage headers must never fail a request
