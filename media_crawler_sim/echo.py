"""The hostile "echo" profile: a platform that sends the caller's credentials back.

Off unless asked for (`Simulator(behaviour=Behaviour(echo_secrets=True))`,
`media-crawler sim --echo-secrets`, or `POST /_sim/echo?on=1`). When on, every answer of the
platform APIs (Bilibili, both Weibo APIs, Facebook Graph) and of the URL-list
feeds carries whatever credentials the request carried: the cookies
(`SESSDATA`, `SUB`, `SUBP`, ... and the whole Cookie header), an
`Authorization` header (and the password of a Basic one), and credential query
parameters (`access_token`, ...). Each value is echoed raw, URL-encoded,
URL-decoded and in base64 (standard and URL-safe), in:

- error bodies, in each platform's real shapes, on the first request of a route
  (`ERRORS` below: Bilibili -352 / 62002 / -404, Weibo `ok:-100` / "频繁" / 20101,
  Graph 190/463 and 100/33);
- a 302 redirect on the second request of a route: `Location` back to the same
  URL with the value in its query, plus `X-Echo*` and `Set-Cookie` headers;
- successful bodies: titles, descriptions, texts, names; ids (`bvid`, Facebook
  `target.id`, Weibo `pid`); cursors (`since_id`, Graph `cursors`); `next` /
  `previous` links and page URLs (`echo<i>=<value as is>&echo<i>e=<a form,
  URL-encoded>`); URL-list items get a title and the feed a second page; and every
  media URL gets the value as query parameters, a path segment
  (`/_echo/<form>/_echo_end/media/...`), a fragment or userinfo
  (`http://echo:<value>@127.0.0.1:PORT/...`, which a careful client refuses);
- headers of every API answer (`X-Echo` base64, `X-Echo-Raw`, `X-Echo-Encoded`,
  `Set-Cookie: echo_<api>=<base64url>`), and of media answers when the download
  carried a credential (it should not).

The echoes must not break the simulator itself, so inbound requests are cleaned
first (`clean`): `echo*` query parameters go, values lose their `~e~...` tail
(the id and cursor echoes), and paths lose `/_echo/.../_echo_end` segments and
`~e~...` tails. What a crawler stores or logs is then up to the crawler: that is
what the profile is for (media_crawler_tests/observe/test_echoed_secrets.py).

`seen()` lists every credential value the profile saw in a request, so a test
can tell that the secrets really travelled.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections import Counter
from dataclasses import replace
from typing import Callable
from urllib.parse import quote, unquote, urlencode, urlsplit

from media_crawler_sim.exchange import JSON_TYPE, Request, Response, json_response

MARK = "~e~"  # id / cursor echo: `<real value>~e~<echoed form>`
PATH_START, PATH_END = "/_echo/", "/_echo_end"
HOP_PARAM = "echo_hop"  # set on the Location of an echo redirect: answer, do not redirect again
# Cookies a web client sends that identify a browser, not a person.
NOT_CREDENTIAL_COOKIES = frozenset({"buvid3", "buvid4", "_uuid", "b_nut"})
CREDENTIAL_PARAMS = frozenset({
    "access_token", "sessdata", "sub", "subp", "token", "auth", "password", "api_key", "apikey", "client_secret",
    "bili_jct",
})
TEXT_KEYS = frozenset({
    "title", "desc", "description", "message", "text", "text_raw", "part", "name", "screen_name", "uname",
    "longTextContent", "page_title", "content1", "video_title", "dynamic",
})
LINK_KEYS = frozenset({
    "permalink_url", "url", "unshimmed_url", "scheme", "profile_url", "page_url", "h5_url", "uri", "next", "previous",
})
FORM_NAMES = ("raw", "urlencoded", "urldecoded", "base64", "base64url")

_PATH_ECHO = re.compile(re.escape(PATH_START) + r".*?" + re.escape(PATH_END) + r"(?=/|$)")
_PATH_MARK = re.compile(re.escape(MARK) + r"[^/]*")


def forms(value: str) -> dict[str, str]:
    """The encodings the profile echoes a value in, by name."""
    raw = value.encode()
    return {
        "raw": value,
        "urlencoded": quote(value, safe=""),
        "urldecoded": unquote(value),
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }


def credentials_of(request: Request) -> list[str]:
    """The credential values a request carries, in a stable order, without repeats."""
    found: list[str] = []
    cookie = request.headers.get("Cookie") or ""
    carried_secret_cookie = False
    for part in cookie.split(";"):
        name, sep, value = part.strip().partition("=")
        # echo_* cookies are this profile's own Set-Cookie coming back, not the caller's.
        if sep and value and name not in NOT_CREDENTIAL_COOKIES and not name.startswith("echo_"):
            found.append(value)
            carried_secret_cookie = True
    if carried_secret_cookie:
        found.append(cookie.strip())
    authorization = (request.headers.get("Authorization") or "").strip()
    if authorization:
        found.append(authorization)
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credentials, validate=True).decode()
            except ValueError:
                decoded = ""
            if decoded:
                found += [decoded, decoded.partition(":")[2]]
        elif credentials:
            found.append(credentials)
    for name, value in request.pairs:
        if name.lower() in CREDENTIAL_PARAMS and value:
            found.append(value)
    unique: list[str] = []
    for value in found:
        if value and value not in unique:
            unique.append(value)
    return unique


def _stable(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


class EchoProfile:
    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self._seen: list[str] = []
        self._routes: Counter[tuple[str, str]] = Counter()
        self.echoed: Counter[str] = Counter()  # answers that carried an echo, by kind

    # --- bookkeeping -------------------------------------------------------------

    def seen(self) -> list[str]:
        """Every credential value seen in a request so far (in-process only: never over HTTP)."""
        with self._lock:
            return list(self._seen)

    def status(self) -> dict:
        with self._lock:
            return {"enabled": self.enabled, "credentials_seen": len(self._seen), "echoed": dict(self.echoed)}

    def reset(self) -> None:
        with self._lock:
            self._routes.clear()
            self.echoed.clear()

    def _note(self, values: list[str], kind: str) -> None:
        with self._lock:
            for value in values:
                if value not in self._seen:
                    self._seen.append(value)
            if values:
                self.echoed[kind] += 1

    def _count(self, prefix: str, route: str) -> int:
        with self._lock:
            self._routes[(prefix, route)] += 1
            return self._routes[(prefix, route)]

    # --- inbound -----------------------------------------------------------------

    @staticmethod
    def clean(request: Request) -> Request:
        """The request as the simulator's handlers must see it: without the echoes."""
        path = _PATH_MARK.sub("", _PATH_ECHO.sub("", request.path))
        pairs = tuple(
            (key, value.split(MARK, 1)[0]) for key, value in request.pairs if not key.lower().startswith("echo")
        )
        if path == request.path and pairs == request.pairs:
            return request
        return replace(request, path=path, pairs=pairs)

    # --- answers -----------------------------------------------------------------

    def answer(self, raw: Request, prefix: str, handle: Callable[[Request], Response]) -> Response:
        """The hostile answer to an API request (`raw`, as it arrived)."""
        request = self.clean(raw)
        values = credentials_of(raw)
        clean_subpath = request.path[len(prefix):]
        if not values:
            return handle(request)
        hop = any(key == HOP_PARAM for key, _ in raw.pairs)
        route = _route_name(prefix, clean_subpath)
        attempt = 0 if hop else self._count(prefix, route)
        if attempt == 1 and (prefix, route) in ERRORS:
            self._note(values, "error")
            response = ERRORS[(prefix, route)](values)
        elif attempt == 2:
            self._note(values, "redirect")
            response = self._redirect(raw, values)
        else:
            self._note(values, "body")
            response = self._echo_body(raw, prefix, handle(request), values)
        self._echo_headers(response, values, prefix)
        return response

    def media_answer(self, raw: Request, handle: Callable[[Request], Response]) -> Response:
        """Media bytes are left alone; the headers echo what the request carried."""
        request = self.clean(raw)
        values = credentials_of(raw)
        response = handle(request)
        if values:
            self._note(values, "media")
            self._echo_headers(response, values, "/media")
        return response

    def _redirect(self, raw: Request, values: list[str]) -> Response:
        pairs = list(raw.pairs) + [(HOP_PARAM, "1")]
        for index, value in enumerate(values):
            pairs.append((f"echo{index}", value))  # urlencode: the raw value, URL-encoded once
        location = f"{raw.base_url}{quote(raw.path)}?{urlencode(pairs)}"
        body = json_response({"redirect": location, "echo": values}).body
        return Response(302, body, {"Location": location, "Content-Type": JSON_TYPE})

    @staticmethod
    def _paged_feed(raw: Request, payload: dict) -> dict:
        """URL-list feeds: a title on every item, and a `next` page (the same items
        again) on the first page only; the walk then puts echoes into both."""
        items = [dict(item, title=item.get("title") or f"sim item {index}") if isinstance(item, dict) else item
                 for index, item in enumerate(payload["items"])]
        payload = dict(payload, items=items)
        if not any(key == "echo_page" for key, _ in raw.pairs):
            # The feed's own query (a signed feed keeps its credentials) and the page.
            kept = [(key, value) for key, value in raw.pairs if not key.lower().startswith("echo")]
            payload["next"] = f"{raw.path}?{urlencode(kept + [('echo_page', '2')])}"
        return payload

    @staticmethod
    def _echo_headers(response: Response, values: list[str], prefix: str) -> None:
        first = values[0]
        response.headers["X-Echo"] = forms(first)["base64"]
        response.headers["X-Echo-Raw"] = _header_safe(first)
        response.headers["X-Echo-Encoded"] = forms(first)["urlencoded"]
        # A cookie value holds no `,` `;` or white space: the URL-safe base64 form. The
        # echo_ name keeps it out of what the profile counts as the caller's credentials.
        name = "echo_" + prefix.strip("/").replace("-", "_")
        response.headers["Set-Cookie"] = f"{name}={forms(first)['base64url']}; Path=/; HttpOnly"

    def _echo_body(self, raw: Request, prefix: str, response: Response, values: list[str]) -> Response:
        if not response.headers.get("Content-Type", "").startswith("application/json") or not response.body:
            return response
        try:
            payload = json.loads(response.body)
        except ValueError:  # a fault answer cut on purpose: leave it cut
            return response
        echoer = _BodyEchoer(raw.base_url, values)
        if prefix == "/urls" and isinstance(payload, dict) and isinstance(payload.get("items"), list):
            payload = self._paged_feed(raw, payload)
        payload = echoer.walk(payload, "")
        if isinstance(payload, dict):
            payload["_echo"] = {name: [forms(value)[name] for value in values] for name in FORM_NAMES}
        answer = json_response(payload, status=response.status, headers=response.headers)
        answer.cut_after = response.cut_after
        return answer


class _BodyEchoer:
    """Puts the values into a decoded JSON answer, rotating over values and encodings
    so every (value, encoding) pair turns up in every kind of place."""

    def __init__(self, base_url: str, values: list[str]) -> None:
        self.base_url = base_url
        self.media_prefix = base_url + "/media/"
        self.values = values
        self._turn = 0

    def _next(self, names: tuple[str, ...] = FORM_NAMES) -> tuple[str, str]:
        """(value, form name) of the next turn."""
        turn = self._turn
        self._turn += 1
        value = self.values[turn % len(self.values)]
        return value, names[(turn // len(self.values)) % len(names)]

    def walk(self, node, key: str, parent: str = ""):
        if isinstance(node, dict):
            return {name: self.walk(value, name, key) for name, value in node.items()}
        if isinstance(node, list):
            return [self.walk(item, key, parent) for item in node]
        if isinstance(node, str):
            return self.string(node, key, parent)
        if key == "since_id" and isinstance(node, int) and node:
            return self.mark(str(node))
        return node

    def string(self, text: str, key: str, parent: str) -> str:
        if text.startswith(self.media_prefix):
            return self.media_url(text, key)
        if key in TEXT_KEYS and text:
            value, name = self._next()
            return f"{text} [echo {name}: {forms(value)[name]}]"
        if key == "bvid" or key == "pid" or key == "since_id" or (parent == "cursors" and key in ("before", "after")):
            return self.mark(text) if text else text
        if key == "id" and parent == "target":
            value, name = self._next(("base64url", "urlencoded"))  # ids that go into URL paths: no raw `/`
            return f"{text}{MARK}{quote(forms(value)[name], safe='')}"
        if key in LINK_KEYS and (text.startswith("http") or text.startswith("/")):
            return self.link(text)
        return text

    def mark(self, text: str) -> str:
        value, name = self._next()
        return f"{text}{MARK}{forms(value)[name]}"

    def query(self) -> str:
        """Echo parameters for every value: `echo<i>=` the value as is (a raw `%2C`
        reads as `,` once decoded) and `echo<i>e=` one of its forms URL-encoded."""
        params = []
        for index, value in enumerate(self.values):
            _, name = self._next()
            params.append(f"echo{index}={value}&echo{index}e={quote(forms(value)[name], safe='')}")
        return "&".join(params)

    def link(self, url: str) -> str:
        base, _, fragment = url.partition("#")
        joiner = "&" if "?" in base else "?"
        linked = f"{base}{joiner}{self.query()}"
        return f"{linked}#{fragment}" if fragment else linked

    def media_url(self, url: str, key: str) -> str:
        """The media URL with an echo in one of five places, chosen by its path and key
        (stable across answers, so one file always comes back the same way)."""
        split = urlsplit(url)
        value, name = self._next()
        form = forms(value)[name]
        choice = _stable(f"{split.path}|{key}") % 8
        if choice in (0, 1):  # query parameters, every value as is and in one encoding
            return url + ("&" if split.query else "?") + self.query()
        if choice in (2, 3):  # path segment, right after the origin
            segment = forms(value)["base64url"] if choice == 2 else quote(form, safe="")
            return f"{self.base_url}{PATH_START}{segment}{PATH_END}{url[len(self.base_url):]}"
        if choice in (4, 5):  # fragment: never sent, but part of the URL a client keeps
            return f"{url}#echo={form}"
        if choice == 6:  # userinfo: http://echo:<value>@127.0.0.1:PORT/...
            origin = self.base_url.split("://", 1)[1]
            return f"http://echo:{quote(value, safe='')}@{origin}{url[len(self.base_url):]}"
        return url + ("&" if split.query else "?") + f"echo={quote(form, safe='')}#{form}"


def _header_safe(value: str) -> str:
    return "".join(char if 32 <= ord(char) < 127 else "?" for char in value)


def _route_name(prefix: str, subpath: str) -> str:
    if prefix == "/facebook":
        return "posts" if subpath.rstrip("/").rsplit("/", 1)[-1] in ("posts", "feed", "published_posts") else "node"
    if prefix == "/urls":
        return "feed"
    return subpath


# --- the error answers (first request of a route) ---------------------------------------------


def _bilibili(code: int, message: str, data=None) -> Response:
    return json_response({"code": code, "message": message, "ttl": 1, "data": data})


def _values_in(values: list[str], name: str) -> str:
    return forms(values[0])[name]


def _risk_control(values: list[str]) -> Response:  # rate_limited: the step is retried
    voucher = "voucher_" + forms(values[0])["base64"]
    return _bilibili(-352, f"risk control, SESSDATA={values[0]} rejected",
                     {"v_voucher": voucher, "echo": [forms(value)["urlencoded"] for value in values]})


def _invisible(values: list[str]) -> Response:  # not_found: one video gone
    return _bilibili(62002, f"稿件不可见 (SESSDATA={_values_in(values, 'urlencoded')})")


def _nothing_here(values: list[str]) -> Response:  # not_found: one part gone
    return _bilibili(-404, f"啥都木有 cookie: {values[-1]} / {_values_in(values, 'urldecoded')}")


def _login_wall(values: list[str]) -> Response:  # auth: the source fails
    encoded = quote(values[0], safe="")
    return json_response({
        "ok": -100, "msg": f"请先登录 SUB={values[0]}",
        "url": f"https://passport.weibo.cn/signin/login?entry=mweibo&SUB={encoded}&r={quote(values[-1], safe='')}",
    })


def _deleted_post(values: list[str]) -> Response:  # not_found: one post gone
    return json_response({"ok": 0, "msg": f"请求的内容不存在 SUBP={_values_in(values, 'base64')}", "errno": 20101})


def _too_frequent(values: list[str]) -> Response:  # rate_limited: the step is retried
    return json_response({"ok": 0, "msg": f"请求过于频繁，请稍后再试 (SUB={_values_in(values, 'urldecoded')})",
                          "errno": 100005, "cookie": values[-1]})


def _ajax_deleted(values: list[str]) -> Response:  # not_found
    return json_response({"ok": 0, "message": f"该微博不存在 SUBP={values[-1]}", "errno": 20101})


def _graph_error(status: int, code: int, message: str, kind: str, subcode: int) -> Response:
    error = {"message": message, "type": kind, "code": code, "error_subcode": subcode, "fbtrace_id": "SimEchoTrace"}
    return json_response({"error": error}, status=status)


def _expired_token(values: list[str]) -> Response:  # auth: the source fails
    return _graph_error(400, 190, f"Error validating access token: Session has expired. The access token {values[0]} "
                        f"(access_token={quote(values[0], safe='')}) is no longer valid.", "OAuthException", 463)


def _missing_node(values: list[str]) -> Response:  # not_found
    return _graph_error(400, 100, "Unsupported get request. Object with ID '"
                        f"{forms(values[0])['base64']}' does not exist (access_token={values[0]}).",
                        "GraphMethodException", 33)


ERRORS: dict[tuple[str, str], Callable[[list[str]], Response]] = {
    ("/bilibili", "/x/space/wbi/arc/search"): _risk_control,
    ("/bilibili", "/x/web-interface/view"): _invisible,
    ("/bilibili", "/x/player/wbi/playurl"): _nothing_here,
    ("/weibo-m", "/api/container/getIndex"): _login_wall,
    ("/weibo-m", "/statuses/show"): _deleted_post,
    ("/weibo", "/ajax/statuses/mymblog"): _too_frequent,
    ("/weibo", "/ajax/statuses/show"): _ajax_deleted,
    ("/facebook", "posts"): _expired_token,
    ("/facebook", "node"): _missing_node,
}
