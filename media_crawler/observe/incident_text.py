"""Platform health and incidents as text, one way for `status` and `failures`.

Takes the JSON form (platform_signals.health_json: timestamps as UTC text). An
incident that ended says so ("since ... until ..."): the record stays, the state
is ok again.
"""
from __future__ import annotations

from typing import Any


def platform_detail(health: dict[str, Any]) -> str:
    """What lasts now on one platform, then its ended incidents: `status`'s text after the state."""
    detail = []
    if health["rate_limited"]:
        detail.append(f"rate limited since {health['rate_limited_since'] or '?'}"
                      + (f", slowed until {health['slowed_until']}" if health["slowed_until"] else ""))
    if health["auth_failures"]:
        detail.append(f"auth failed since {health['auth_failed_since']}: {health['auth_failures']} failure(s), "
                      "no success since")
    if health.get("outage_state", "ok") != "ok":
        detail.append(f"{health['outage_state']} since {health['outage_since'] or '?'}: "
                      f"{health['failures_since_last_success']} server-side failure(s) in a row, no success since "
                      f"({health['outage_failures_1h']} failed, {health['requests_ok_1h']} ok in the last hour)")
    detail += [f"was {incident_text(incident)}" for incident in health.get("incidents", []) if not incident["ongoing"]]
    return "; ".join(detail)


def incident_text(incident: dict[str, Any]) -> str:
    """`auth_failed since A until B (3 failures)`, or `down since A, ongoing (5 failures)`."""
    span = f"since {incident['since']} " + (f"until {incident['until']}" if incident["until"] else "ongoing")
    return f"{incident['state']} {span} ({incident['failures']} failure(s))"


def incident_lines(incidents: list[dict[str, Any]]) -> list[str]:
    """One line per incident, ongoing first, for `failures`."""
    ordered = sorted(incidents, key=lambda incident: (not incident["ongoing"], incident["platform"], incident["kind"]))
    return [f"  {incident['platform']:<9} {incident_text(incident)}" for incident in ordered]
