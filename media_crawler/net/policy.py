"""What a request may reach: one rule for feed pages, `next` links, API calls, media and redirect hops.

A policy is built from host entries (the platform's CDN patterns, `media_hosts`,
`allow_hosts`, the origins of `api_base` and of a URL feed):

| entry | public addresses | internal addresses |
|---|---|---|
| `*` | any host | never |
| `*.hdslb.com` | that domain's subdomains | never |
| `cdn.example.org` | that name, any port | that name, ports 80 and 443 |
| `nas.local:8080`, `http://nas.local:8080/...` | that name, any port | that name, port 8080 |
| `127.0.0.1:*` | | any port of that host (a local simulator whose port changes) |

"Internal" is net/addresses.py: loopback, private, link-local (169.254.169.254),
CGNAT, multicast, unspecified, and IPv6 spellings of them. A name is judged
by every address it resolves to (`resolve`), in the one lookup whose answer the
connection then dials (net/pinning.py).

Two kinds of refusal (docs/DESIGN.md, "Refused URLs"):
- host_not_allowed: a public host no entry lists, or an internal origin this deployment
  names elsewhere (its `api_base`) but not in this list. A settings matter: the message
  names the host and the setting to change (`settings`), the item ends failed, and a
  re-run after the change fetches it.
- disallowed_url: hostile or broken: an internal address nothing names (or on a port
  not listed), a name resolving to one, a malformed URL. The item ends gone: listing
  it is never the fix, so it does not keep its partition red.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from media_crawler.net.addresses import Address, is_internal_address, parse_address
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.net.targets import DEFAULT_PORTS, Target, parse_target, refuse

ANY_PORT = None  # in `internal`: the host is listed with `:*`


def _is_local_name(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost")


@dataclass(frozen=True)
class UrlPolicy:
    """Which hosts (and, for internal addresses, which ports) a request may go to."""

    any_public: bool = False
    public_names: frozenset[str] = frozenset()
    public_suffixes: tuple[str, ...] = ()  # ".hdslb.com" for `*.hdslb.com`
    # host -> the ports it is listed with (ANY_PORT: every port); only these may be internal
    internal: Mapping[str, frozenset[int] | None] = field(default_factory=dict)
    # The settings an operator edits to list a host here, named in a refusal
    # ("platforms.weibo.media_hosts or allow_hosts").
    settings: str = "allowed hosts"
    # Internal (host, port) origins the deployment names elsewhere (an `api_base`): one
    # refused here is the operator's own server, not a hostile address.
    named_elsewhere: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def from_settings(cls, entries: Iterable[str], *, settings: str, named_elsewhere: Iterable[str] = ()) -> "UrlPolicy":
        """The policy of `entries`, whose refusals name `settings` as the place to list a
        host; `named_elsewhere`: URLs or host entries the deployment uses for something else."""
        origins = set()
        for entry in named_elsewhere:
            try:
                host, ports = _listed_host((entry or "").strip().lower())
            except CrawlError:
                continue  # config.py refused a bad entry already; nothing to name
            origins.update((host, port) for port in (ports or ()))
        policy = cls.from_entries(entries)
        return cls(policy.any_public, policy.public_names, policy.public_suffixes, policy.internal,
                   settings, frozenset(origins))

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> "UrlPolicy":
        any_public, names, suffixes, internal = False, set(), [], {}
        for raw in entries:
            entry = (raw or "").strip().lower()
            if not entry:
                continue
            if entry == "*":
                any_public = True
            elif entry.startswith("*."):
                suffixes.append(entry[1:].rstrip("."))
            else:
                host, ports = _listed_host(entry)
                names.add(host)
                known = internal.get(host, frozenset())
                internal[host] = None if ports is ANY_PORT or known is ANY_PORT else known | ports
        return cls(any_public, frozenset(names), tuple(suffixes), internal)

    def lists_internal(self, host: str, port: int) -> bool:
        """Whether `host` is listed exactly for `port`, so it may be (or resolve to) an internal address."""
        if host not in self.internal:
            return False
        ports = self.internal[host]
        return ports is ANY_PORT or port in ports

    def check(self, url: object) -> Target:
        """The parsed Target of `url`, or CrawlError(disallowed_url); no DNS, no connection."""
        target = parse_target(url)
        if self.lists_internal(target.host, target.port):
            return target
        internal = _is_local_name(target.host) or (
            target.address is not None and is_internal_address(target.address))
        if internal:
            if (target.host, target.port) in self.named_elsewhere:
                raise self.not_listed(target, f"{target.host}:{target.port}")
            listed = self.internal.get(target.host)
            if listed:
                ports = ", ".join(str(p) for p in sorted(listed))
                raise refuse(f"internal host {target.host} is allowed on port {ports} only, not {target.port}")
            raise refuse(f"internal host {target.host} is not listed in allowed hosts")
        if self.any_public or target.host in self.public_names:
            return target
        if target.address is None and any(target.host.endswith(suffix) for suffix in self.public_suffixes):
            return target
        raise self.not_listed(target, target.host)

    def not_listed(self, target: Target, entry: str) -> CrawlError:
        """host_not_allowed for `target`: its host and the setting to add `entry` to."""
        pattern = " (or a *.domain pattern for a CDN)" if target.address is None and entry == target.host else ""
        return CrawlError(ErrorClass.HOST_NOT_ALLOWED,
                          f"host {target.host} is not listed in {self.settings}: add {entry!r} there{pattern} "
                          "and re-run the partition")

    def admits(self, host: str, port: int, address: Address) -> bool:
        """Whether a connection to `host`:`port` may go to `address`."""
        return self.lists_internal(host, port) or not is_internal_address(address)

    def resolve(self, host: str, port: int) -> list[Address]:
        """Every address `host` resolves to, each one admitted, in the resolver's order.

        One lookup: the caller dials these exact addresses, so a name cannot
        answer a public address here and an internal one to a second lookup.
        A name with any internal answer is refused whole (a mixed answer is
        how a rebinding attack hedges its bets).
        """
        literal = parse_address(host)
        if literal is not None:
            addresses = [literal]
        else:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addresses = []
            for info in infos:
                address = parse_address(str(info[4][0]).split("%", 1)[0])
                if address is not None and address not in addresses:
                    addresses.append(address)
            if not addresses:
                raise socket.gaierror(socket.EAI_NONAME, f"{host} has no usable address")
        for address in addresses:
            if not self.admits(host, port, address):
                raise AddressRefused(f"{host} resolves to internal address {address}, and is not listed for port {port}")
        return addresses


class AddressRefused(Exception):
    """A connection's host resolved to an address its policy refuses.

    Not an OSError on purpose: urllib3 would take it for a network failure and
    requests would call it a ConnectionError; it is a refusal (disallowed_url).
    """


def _listed_host(entry: str) -> tuple[str, frozenset[int] | None]:
    """`host`, `host:port`, `host:*`, `[v6]:port` or an origin URL -> (host, ports listed).
    One `:*` is stripped, without recursing: a hostile `a:*:*:*...` is refused by
    parse_target as any other bad port, not by the interpreter's recursion limit."""
    any_port = entry.endswith(":*")
    if any_port:
        entry = entry[:-2]
    if "://" in entry:
        target = parse_target(entry)
        ports = frozenset({target.port})
    else:
        target = parse_target(f"http://{entry.strip('/')}/")
        after_literal = entry.rsplit("]", 1)[-1] if entry.startswith("[") else entry
        ports = frozenset({target.port}) if ":" in after_literal else frozenset(DEFAULT_PORTS.values())
    return target.host, ANY_PORT if any_port else ports
