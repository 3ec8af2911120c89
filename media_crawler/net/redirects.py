"""Following redirects under the URL policy: every hop is checked like the first URL.

requests would follow a 302 to 169.254.169.254 by itself; here each Location is
joined to the URL it came from, parsed and checked by the same policy, and
credentials attached for one origin never follow a hop to another.
"""
from __future__ import annotations

from typing import Callable, Mapping, Protocol

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.net.pinning import check_proxied_target, under_policy
from media_crawler.net.policy import AddressRefused, UrlPolicy
from media_crawler.net.targets import Target, join_reference

REDIRECT_STATUSES = (301, 302, 303, 307, 308)
CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")


class Answer(Protocol):
    status_code: int
    headers: Mapping[str, str]

    def close(self) -> None: ...


# send(target, headers) -> the answer to one GET of target.url, redirects not followed
Send = Callable[[Target, Mapping[str, str]], Answer]
# proxy_for(url) -> the proxy that will carry the request for url, None when it goes direct
ProxyFor = Callable[[str], str | None]


def get_following_redirects(policy: UrlPolicy, url: str, headers: Mapping[str, str], send: Send, *,
                            max_redirects: int, proxy_for: ProxyFor | None = None) -> tuple[Answer, Target]:
    """The final answer and the Target it came from; CrawlError(disallowed_url or
    host_not_allowed, as the policy says) for a refused hop."""
    current, hop_headers = url, headers  # never changed in place: a hop to another origin gets a copy
    with under_policy(policy):
        for _ in range(max_redirects + 1):
            target = policy.check(current)
            try:
                if proxy_for is not None:
                    check_proxied_target(policy, target, proxy_for(target.url))
                answer = send(target, hop_headers)
            except AddressRefused as exc:
                raise CrawlError(ErrorClass.DISALLOWED_URL, str(exc)) from None
            location = answer.headers.get("Location")
            if answer.status_code not in REDIRECT_STATUSES or not location:
                return answer, target
            answer.close()
            try:
                current = join_reference(target.url, location)
                next_origin = policy.check(current).origin
            except CrawlError as refusal:  # its class stays: a CDN moving to an unlisted host is host_not_allowed
                raise CrawlError(refusal.error_class,
                                 f"redirect {answer.status_code} refused: {refusal.message}") from None
            if next_origin != target.origin:
                hop_headers = {k: v for k, v in hop_headers.items() if k.lower() not in CREDENTIAL_HEADERS}
    raise CrawlError(ErrorClass.DISALLOWED_URL, f"more than {max_redirects} redirects")
