"""Weibo answers → "ok", "end of list", or a CrawlError.

- `ok:1`: fine. `ok:0` "这里还没有内容" (nothing here) or an empty card list:
  the end of the feed, not a ban.
- `ok:-100` with a login `url`: the login / visitor wall (auth).
- HTTP 418 and 432: rate-limited / blocked; 403: missing Referer or banned (auth).
- A redirect to passport.weibo.com answering HTML: the visitor wall again.
"""
from __future__ import annotations

from typing import Any, Literal

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.fields import as_int, as_str
from media_crawler.platforms.responses import decode_json, http_status_error, parse_error
from media_crawler.platforms.weibo.posts import PLATFORM
from media_crawler.scrub import excerpt

Verdict = Literal["ok", "end"]

END_OF_LIST_MESSAGES = ("这里还没有内容", "还没有内容", "暂无")
RATE_LIMIT_MESSAGES = ("频繁", "too frequent")
NOT_FOUND_MESSAGES = ("不存在", "已被删除", "已删除", "无权限查看", "不可见")
NOT_FOUND_ERRNOS = frozenset({20101, 20112, 20003})  # target post missing / hidden / user missing


def classify_body(body: Any) -> Verdict:
    """'ok' or 'end' for a decoded body; raises CrawlError for errors."""
    if not isinstance(body, dict):
        raise parse_error(PLATFORM, "answer is not a JSON object", body)
    ok = as_int(body.get("ok"))
    message = as_str(body.get("msg")) or as_str(body.get("message")) or ""
    if ok == 1:
        return "ok"
    if ok == -100:
        raise CrawlError(ErrorClass.AUTH, f"login required ({as_str(body.get('url')) or 'no url'})", platform_code=-100)
    if ok == 0:
        errno = as_int(body.get("errno")) or as_int(body.get("error_code"))
        if any(text in message for text in RATE_LIMIT_MESSAGES):
            raise CrawlError(ErrorClass.RATE_LIMITED, f"ok:0 {message}", platform_code=errno or 0)
        if errno in NOT_FOUND_ERRNOS or any(text in message for text in NOT_FOUND_MESSAGES):
            raise CrawlError(ErrorClass.NOT_FOUND, f"ok:0 {message}".strip(), platform_code=errno or 0)
        if any(text in message for text in END_OF_LIST_MESSAGES) or not message:
            return "end"
    raise parse_error(PLATFORM, f"unexpected answer ok={excerpt(repr(body.get('ok')), 80)} {excerpt(message, 200)}".strip(), body)


def classify_answer(body: Any) -> CrawlError | None:
    """The CrawlError a decoded answer stands for (None: ok or the end of the list)."""
    try:
        classify_body(body)
    except CrawlError as error:
        return error
    return None


def decode_response(response: ApiResponse) -> Any:
    """The decoded body; HTTP-level failures raised."""
    status = response.status
    if status in (418, 432):
        raise CrawlError(ErrorClass.RATE_LIMITED, f"HTTP {status} from {response.url}", http_status=status)
    if status == 403:
        raise CrawlError(ErrorClass.AUTH, f"HTTP 403 from {response.url} (Referer missing or banned)", http_status=403)
    error = http_status_error(PLATFORM, response)
    if error is not None:
        raise error
    if "passport.weibo.com" in response.url and not response.text.lstrip().startswith("{"):
        raise CrawlError(ErrorClass.AUTH, "redirected to the visitor/login wall (passport.weibo.com)", http_status=status)
    return decode_json(PLATFORM, response)
