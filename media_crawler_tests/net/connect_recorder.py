"""Every TCP connect of the test process recorded, and none leaving 127.0.0.1.

`socket.socket.connect` is wrapped: a connect to a test server's port on
127.0.0.1 goes through; one to a *public alias* (an address the test resolver
hands out for a public-looking name, such as a feed's) is recorded under the
public address and carried to a local test server; any other connect is
recorded and refused with ECONNREFUSED before a packet is sent. `getaddrinfo`
answers from the test's table (hostile_urls.RESOLVER plus the aliases) and
never asks a real resolver for a name.
"""
from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class ConnectRecorder:
    local_ports: set[int] = field(default_factory=set)  # 127.0.0.1 ports that may be reached
    aliases: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)  # public (ip, port) -> local
    names: dict[str, list[str]] = field(default_factory=dict)  # test resolver: name -> addresses
    connects: list[tuple[str, int, str]] = field(default_factory=list)  # (address, port, "local"|"alias"|"refused")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self, monkeypatch) -> "ConnectRecorder":
        real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
        real_getaddrinfo = socket.getaddrinfo
        recorder = self

        def route(sock, address):
            if not isinstance(address, tuple) or sock.family not in (socket.AF_INET, socket.AF_INET6):
                return address  # a Unix socket (the ledger's database server, say): not network traffic
            host, port = str(address[0]).split("%", 1)[0], int(address[1])
            key = (str(ipaddress.ip_address(host)), port)
            if key in recorder.aliases:
                recorder._note(key, "alias")
                local_host, local_port = recorder.aliases[key]
                return (local_host, local_port) if sock.family == socket.AF_INET else None
            if key[0] == "127.0.0.1" and port in recorder.local_ports:
                recorder._note(key, "local")
                return address
            recorder._note(key, "refused")
            return None

        def connect(sock, address):
            routed = route(sock, address)
            if routed is None:
                raise ConnectionRefusedError(errno.ECONNREFUSED, "refused by the test's connect recorder")
            return real_connect(sock, routed)

        def connect_ex(sock, address):
            routed = route(sock, address)
            return errno.ECONNREFUSED if routed is None else real_connect_ex(sock, routed)

        def getaddrinfo(host, port, *args, **kwargs):
            name = str(host).rstrip(".").lower()
            if name in recorder.names:
                answers = []
                for address in recorder.names[name]:
                    family = socket.AF_INET6 if ":" in address else socket.AF_INET
                    sockaddr = (address, int(port or 0), 0, 0) if family == socket.AF_INET6 else (address, int(port or 0))
                    answers.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
                return answers
            try:
                ipaddress.ip_address(str(host).strip("[]"))
            except ValueError:
                raise socket.gaierror(socket.EAI_NONAME, f"{host}: not in the test's resolver") from None
            return real_getaddrinfo(host, port, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return self

    def _note(self, key: tuple[str, int], outcome: str) -> None:
        with self._lock:
            self.connects.append((key[0], key[1], outcome))

    def reached(self) -> set[tuple[str, int]]:
        """(address, port) of every connect that went through (local or aliased)."""
        return {(host, port) for host, port, outcome in self.connects if outcome != "refused"}

    def attempted(self) -> set[tuple[str, int]]:
        return {(host, port) for host, port, _outcome in self.connects}
