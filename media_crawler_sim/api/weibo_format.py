"""Pieces of a Weibo `mblog` that both APIs (m.weibo.cn and weibo.com ajax) spell alike."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from media_crawler_sim.content.weibo import Post

CHINA = timezone(timedelta(hours=8))
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
NO_CONTENT = {"ok": 0, "msg": "这里还没有内容", "data": {"cards": []}}
VISIBLE = {"type": 0, "list_id": 0}


def created_at(moment: datetime) -> str:
    """`Wed Mar 23 15:10:31 +0800 2022`, always in +0800 like the real API (spelled out
    here because strftime's %a/%b follow the process locale)."""
    local = moment.astimezone(CHINA)
    return f"{_WEEKDAYS[local.weekday()]} {_MONTHS[local.month - 1]} {local:%d %H:%M:%S} +0800 {local.year}"


def counts(post: Post) -> dict:
    seed = int(post.mid[-3:])
    return {"reposts_count": seed % 17, "comments_count": seed % 31, "attitudes_count": seed % 97}


def tombstone(post: Post) -> dict:
    """A reposted status that was deleted: what both APIs leave in `retweeted_status`."""
    return {
        "created_at": created_at(post.created), "id": post.mid, "idstr": post.mid, "mid": post.mid,
        "text": post.text, "deleted": "1", "user": None, "visible": dict(VISIBLE),
    }
