"""A GET over a kept-alive, pinned connection without urllib3's request machinery (issue 31).

urllib3's `urlopen` with its `HTTPResponse` costs about twice a plain
`http.client` exchange (a header dict copied, a Timeout cloned, a response
object with decoders, an error catcher per read): ~170 us of thread CPU a GET
here, a tenth of a small file's whole cost. So once a connection is open, the
media path's next GET on it goes through `http.client` directly:

- only a connection urllib3 opened and pooled is used (`pool._get_conn`, whose
  dropped-connection check runs as for urlopen); a new one, and every
  connect, TLS handshake and proxy, stays urllib3's (media_transport.py falls
  back to `urlopen` when the pool has no live connection), so pinning at
  connect (net/pinning.py `_new_conn`) is unchanged;
- the address the connection dialled is judged again under the policy in force,
  as `_PinnedMixin.request` does (net/pinning.py `judge_reuse`);
- the headers are validated by http.client's `putheader` (no CR/LF injection), on a
  scratch connection once per distinct header set and origin (`_header_lines`): an item's
  headers are its platform's, the same for every item, and the four putheader calls
  (Host's included) were ~8 us a GET;
- the socket waits `timeouts.read` for the response headers, then the caller's
  stall timeout applies to the body (fetcher.py);
- every failure is raised as the urllib3 exception `urlopen` / `read1` would
  raise for it (ReadTimeoutError, ProtocolError, SSLError, InvalidHeader), so
  download/responses.py and fetcher.py classify both paths alike;
- the body's length is judged as urllib3 judges it (`_body_length`): a body cut
  before its Content-Length is a ProtocolError, not a short success.
"""
from __future__ import annotations

import errno
import functools
import http.client
import socket

from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import InvalidHeader, ProtocolError, ReadTimeoutError, SSLError

try:  # as urllib3 does: an interpreter without ssl has no TLS errors to tell apart
    from ssl import CertificateError, SSLError as BaseSSLError
except ImportError:  # pragma: no cover
    BaseSSLError = CertificateError = ()  # type: ignore[assignment,misc]

from media_crawler.http import quick_headers
from media_crawler.net.pinning import judge_reuse


class KeptAliveHeaders:
    """The response's headers read as urllib3's HTTPHeaderDict reads them: names
    without case, a repeated header's values joined by ", ". Made, as urllib3 makes
    its dict, from the message's items() once (a lookup in the message itself
    walks every header through the email policy: ~20 us for a response's reads),
    or taken as http.py's header parse already joined them."""

    __slots__ = ("_joined",)

    def __init__(self, message: http.client.HTTPMessage) -> None:
        quick = quick_headers(message)
        if quick is not None:
            self._joined = quick.joined
            return
        joined: dict[str, str] = {}
        for name, value in message.items():
            key = name.lower()
            joined[key] = f"{joined[key]}, {value}" if key in joined else value
        self._joined = joined

    def get(self, name: str, default=None):
        return self._joined.get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return self._joined[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._joined


class KeptAliveResponse:
    """The parts of urllib3's HTTPResponse the media path reads (download/responses.py, fetcher.py)."""

    def __init__(self, pool: HTTPConnectionPool, connection, response: http.client.HTTPResponse) -> None:
        self._pool, self.connection, self._response = pool, connection, response
        self.status = response.status
        self.headers = KeptAliveHeaders(response.msg)
        self.length_remaining = _body_length(self.headers, response)

    def read1(self, amt: int, decode_content: bool = False) -> bytes:
        """What has arrived, up to amt bytes (never decoded: the caller asked for identity)."""
        response = self._response
        if response.fp is None:
            return b""
        try:
            data = response.read1(amt)
        except socket.timeout as exc:
            self._discard()
            raise ReadTimeoutError(self._pool, None, "Read timed out.") from exc  # type: ignore[arg-type]
        except BaseSSLError as exc:
            self._discard()
            raise SSLError(exc) from exc
        except (http.client.HTTPException, OSError) as exc:
            self._discard()
            raise ProtocolError(f"Connection broken: {exc!r}", exc) from exc
        if data:
            if self.length_remaining is not None:
                self.length_remaining -= len(data)
                if self.length_remaining <= 0:
                    response.close()  # read1 does not close a finished body itself (cpython #113199)
            return data
        response.close()
        if self.length_remaining:  # the server closed before its Content-Length: as urllib3's IncompleteRead
            self._discard()
            raise ProtocolError("Connection broken: IncompleteRead", http.client.IncompleteRead(b"", self.length_remaining))
        return data

    def read(self, amt: int | None = None, decode_content: bool = False) -> bytes:
        """The rest of the body (or up to amt bytes), as urllib3's read."""
        pieces, wanted = [], amt
        while wanted is None or wanted > 0:
            piece = self.read1(1 << 16 if wanted is None else min(wanted, 1 << 16))
            if not piece:
                break
            pieces.append(piece)
            if wanted is not None:
                wanted -= len(piece)
        return b"".join(pieces)

    def release_conn(self) -> None:
        """Back to the pool: reusable if the body was read to its end (else closed first)."""
        connection, self.connection = self.connection, None
        if connection is None:
            return
        if not self._response.isclosed():
            self._response.close()
            connection.close()
        self._pool._put_conn(connection)

    def close(self) -> None:
        """Drop the connection (a body left half read cannot be reused)."""
        self._response.close()
        if self.connection is not None:
            self.connection.close()

    def _discard(self) -> None:
        self._response.close()
        if self.connection is not None:
            self.connection.close()
            self.release_conn()


# The pool's two private methods this path takes a connection with (urllib3 1.x and 2.x have
# both; pyproject admits any urllib3 2): a release without them only loses the lean path.
_POOL_LENDS = all(callable(getattr(HTTPConnectionPool, name, None)) for name in ("_get_conn", "_put_conn"))


def get_on_kept_alive(pool: HTTPConnectionPool, request_uri: str, headers: tuple[tuple[str, str], ...],
                      read_timeout: float | None) -> KeptAliveResponse | None:
    """GET request_uri with `headers` (name, value pairs, in sending order) on one of
    pool's open connections; None when the pool has none open (the caller then goes
    through urllib3's urlopen, which connects). Call it under net/pinning.py
    `under_policy`, as urlopen is."""
    if not _POOL_LENDS:
        return None
    connection = pool._get_conn()  # a dropped connection comes back closed
    if connection.sock is None or connection._tunnel_host is not None:  # a tunnel's Host is not its own
        pool._put_conn(connection)
        return None
    try:
        lines = _header_lines(type(connection), connection.host, connection.port, headers)
    except ValueError:  # a header putheader refuses: nothing was sent, the connection is fine
        pool._put_conn(connection)
        raise
    try:
        judge_reuse(connection)
        if connection.sock.gettimeout() != read_timeout:  # settimeout is a system call even when nothing changes
            connection.sock.settimeout(read_timeout)
        try:
            connection.putrequest("GET", request_uri, skip_host=True, skip_accept_encoding=True)
            connection._output(lines)  # as putheader does with each line; endheaders joins them
            connection.endheaders()
        except BrokenPipeError:
            pass  # as urlopen: the server hung up; its answer (or its absence) says why
        except OSError as exc:
            if exc.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                raise
        try:
            response = http.client.HTTPConnection.getresponse(connection)
        except socket.timeout as exc:
            raise ReadTimeoutError(pool, request_uri, f"Read timed out. (read timeout={read_timeout})") from exc
    except ReadTimeoutError:
        _close_and_return(pool, connection)
        raise
    except (BaseSSLError, CertificateError) as exc:
        _close_and_return(pool, connection)
        raise SSLError(exc) from exc
    except (http.client.HTTPException, OSError) as exc:
        _close_and_return(pool, connection)
        raise ProtocolError("Connection aborted.", exc) from exc
    except BaseException:
        _close_and_return(pool, connection)
        raise
    try:
        return KeptAliveResponse(pool, connection, response)
    except InvalidHeader:
        response.close()
        _close_and_return(pool, connection)
        raise


@functools.lru_cache(maxsize=64)
def _header_lines(connection_class: type[http.client.HTTPConnection], host: str, port: int,
                  headers: tuple[tuple[str, str], ...]) -> bytes:
    """The header lines a `connection_class` connection to host:port sends for `headers`
    after its request line (its own Host and Accept-Encoding unless `headers` has them),
    joined as endheaders joins them. Written by putrequest and putheader themselves, on a
    connection that never connects, so every check they make (no CR/LF in a value, a token
    for a name, urllib3's SKIP_HEADER rule) refuses what they refuse, with their ValueError
    (which lru_cache does not keep: a refused set is refused again each time)."""
    names = {name.lower() for name, _ in headers}
    scratch = connection_class(host, port)
    scratch.putrequest("GET", "/", skip_host="host" in names, skip_accept_encoding="accept-encoding" in names)
    for name, value in headers:
        scratch.putheader(name, value)
    return b"\r\n".join(scratch._buffer[1:])  # after the request line


def _close_and_return(pool: HTTPConnectionPool, connection) -> None:
    connection.close()
    pool._put_conn(connection)


def _body_length(headers: KeptAliveHeaders, response: http.client.HTTPResponse) -> int | None:
    """The body's length as urllib3's HTTPResponse._init_length judges it (its
    IncompleteRead and InvalidHeader follow from this). The bytes are framed by
    http.client on both paths; this only says when an empty read is a cut."""
    length = None
    value = headers.get("content-length")
    transfer_encoding = headers.get("transfer-encoding")
    chunked = transfer_encoding is not None and "chunked" in (
        part.strip() for part in transfer_encoding.lower().split(","))
    if value is not None and not chunked:
        if value.isascii() and value.isdigit():  # one plain length (every CDN's), as _listed_length reads it
            length = int(value)
        else:
            length = _listed_length(value)
    if response.status in (204, 304) or 100 <= response.status < 200:
        length = 0
    return length


def _listed_length(value: str) -> int | None:
    """A Content-Length that is a list ("5, 5") or odd, read as urllib3 reads it."""
    try:
        lengths = {int(part) for part in value.split(",")}
    except ValueError:
        lengths = set()
    if len(lengths) > 1:
        raise InvalidHeader(f"Content-Length contained multiple unmatching values ({value})")
    length = lengths.pop() if lengths else None
    return None if length is not None and length < 0 else length
