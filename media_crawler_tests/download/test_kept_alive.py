"""A GET on a kept-alive connection (download/kept_alive.py) keeps every rule of the first
GET, which urllib3 makes: headers, the policy's judgement of the dialled address, timeouts,
and failures classified alike. Every test makes one request to open the connection first
and checks the server saw both on the same client port (the reused connection)."""
from __future__ import annotations

import pytest

from media_crawler.download.fetcher import download_to_part
from media_crawler.download.kept_alive import KeptAliveResponse
from media_crawler.download.media_transport import MediaTransport
from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.download.responses import open_following_redirects
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import Timeouts
from media_crawler.net.policy import UrlPolicy
from media_crawler_tests.download.httpserver import Reply
from media_crawler_tests.net.connect_recorder import ConnectRecorder

JPEG = b"\xff\xd8\xff" + b"k" * 30_000
LOCAL = UrlPolicy.from_entries(["*", "127.0.0.1:*"])
POLICY = DownloadPolicy(max_bytes=10**6, url_policy=LOCAL, timeouts=Timeouts(connect=5, read=1, stall=1))
HEADERS = {"Referer": "https://example.test/", "Accept-Encoding": "identity"}


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def fetch(transport, url, part, policy=POLICY):
    return download_to_part(transport, DownloadRequest(url, part, headers=HEADERS), policy)


def one_connection(server, path):
    ports = {entry.client_port for entry in server.requests_to(path)}
    assert len(ports) == 1, "the second GET did not reuse the connection"


def test_the_second_get_is_the_lean_one_and_sends_what_the_first_sent(server, tmp_path):
    url = server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg", etag='"v1"'))
    transport = MediaTransport(pool_size=2)
    first = fetch(transport, url, tmp_path / "1.part")
    with open_following_redirects(transport, url, HEADERS, timeouts=POLICY.timeouts, url_policy=LOCAL,
                                  max_redirects=2) as response:
        assert isinstance(response.raw, KeptAliveResponse)
        assert response.status_code == 200 and response.headers.get("etag") == '"v1"'
        assert response.raw.read() == JPEG
        response.raw.release_conn()
    second = fetch(transport, url, tmp_path / "2.part")
    assert first.sha256 == second.sha256 and (tmp_path / "2.part").read_bytes() == JPEG
    sent = [entry.headers for entry in server.requests_to("/a.jpg")]
    assert sent[0] == sent[1] == sent[2]  # Host, User-Agent, Accept, Referer, Accept-Encoding: identity
    one_connection(server, "/a.jpg")


def test_a_body_cut_on_a_reused_connection_is_truncated_and_kept_for_resume(server, tmp_path):
    url = server.route("/a.jpg", Reply(JPEG), Reply(JPEG, etag='"v1"', cut_at=10_000))
    transport = MediaTransport(pool_size=1)
    fetch(transport, url, tmp_path / "1.part")
    with pytest.raises(CrawlError) as caught:
        fetch(transport, url, tmp_path / "2.part")
    assert caught.value.error_class is ErrorClass.TRUNCATED_BODY
    assert (tmp_path / "2.part").read_bytes() == JPEG[:10_000]
    one_connection(server, "/a.jpg")


def test_a_stalled_body_on_a_reused_connection_is_a_network_timeout(server, tmp_path):
    url = server.route("/a.jpg", Reply(JPEG), Reply(JPEG, stall_at=5_000))
    transport = MediaTransport(pool_size=1)
    fetch(transport, url, tmp_path / "1.part")
    with pytest.raises(CrawlError) as caught:
        fetch(transport, url, tmp_path / "2.part")
    assert caught.value.error_class is ErrorClass.NETWORK_TIMEOUT
    one_connection(server, "/a.jpg")


def test_after_a_failure_the_next_get_opens_a_new_connection_and_succeeds(server, tmp_path):
    url = server.route("/a.jpg", Reply(JPEG), Reply(JPEG, cut_at=100), Reply(JPEG))
    transport = MediaTransport(pool_size=1)
    fetch(transport, url, tmp_path / "1.part")
    with pytest.raises(CrawlError):
        fetch(transport, url, tmp_path / "2.part")
    assert fetch(transport, url, tmp_path / "3.part").size == len(JPEG)
    ports = [entry.client_port for entry in server.requests_to("/a.jpg")]
    assert ports[0] == ports[1] != ports[2]


@pytest.mark.parametrize("reply", [
    Reply(JPEG, headers={"content-length": "7"}),  # two unmatching Content-Lengths
    Reply(b"<html>error</html>", status=503, headers={"Retry-After": "1"}),
    Reply(b"gone", status=404),
    Reply(JPEG, cut_at=0),
    Reply(JPEG, cut_at=20_000),
    Reply(JPEG, stall_at=100),
], ids=["two-lengths", "503", "404", "cut-at-0", "cut-midway", "stall"])
def test_an_answer_is_classified_alike_on_a_new_and_on_a_reused_connection(server, tmp_path, reply):
    """The first GET of each transport goes through urllib3's urlopen, the second through
    kept_alive.py: the same hostile answer must land in the same error class."""
    def outcome(url, part):
        try:
            return fetch(transport, url, part).size
        except CrawlError as error:
            return error.error_class

    fresh = server.route("/fresh.jpg", reply)
    transport = MediaTransport(pool_size=1)
    on_new = outcome(fresh, tmp_path / "new.part")
    reused = server.route("/reused.jpg", Reply(JPEG), reply)
    transport = MediaTransport(pool_size=1)
    assert outcome(reused, tmp_path / "0.part") == len(JPEG)
    on_reused = outcome(reused, tmp_path / "reused.part")
    assert isinstance(on_new, ErrorClass) and on_reused is on_new
    one_connection(server, "/reused.jpg")


def test_a_reused_connection_is_judged_again_under_another_policy(server, monkeypatch, tmp_path):
    """A name listed with its port may resolve to 127.0.0.1; under a policy that lists only
    public names, the same kept-alive connection to that address is refused before sending."""
    ConnectRecorder(local_ports={server.port}, names={"cdn.example.test": ["127.0.0.1"]}).install(monkeypatch)
    server.route("/a.jpg", Reply(JPEG), Reply(JPEG))
    url = f"http://cdn.example.test:{server.port}/a.jpg"
    listed = DownloadPolicy(max_bytes=10**6, url_policy=UrlPolicy.from_entries([f"cdn.example.test:{server.port}"]))
    public_only = DownloadPolicy(max_bytes=10**6, url_policy=UrlPolicy.from_entries(["*"]))
    transport = MediaTransport(pool_size=1)
    assert fetch(transport, url, tmp_path / "1.part", listed).size == len(JPEG)
    with pytest.raises(CrawlError) as caught:
        fetch(transport, url, tmp_path / "2.part", public_only)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL and "127.0.0.1" in caught.value.message
    assert len(server.requests_to("/a.jpg")) == 1  # nothing was sent on the refused connection
    assert fetch(transport, url, tmp_path / "3.part", listed).size == len(JPEG)


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """The scripted server behind TLS, with a throwaway certificate for 127.0.0.1 that the
    media transport trusts through REQUESTS_CA_BUNDLE (as a TLS-inspecting proxy's CA)."""
    import shutil
    import ssl
    import subprocess

    from media_crawler_tests.download.httpserver import ScriptedServer

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    scripted = ScriptedServer()
    scripted._httpd.socket = context.wrap_socket(scripted._httpd.socket, server_side=True)
    with scripted:
        yield scripted


def test_over_tls_the_second_get_reuses_the_verified_connection_and_a_cut_is_truncated(tls_server, tmp_path):
    path = "/t.jpg"
    tls_server.route(path, Reply(JPEG), Reply(JPEG), Reply(JPEG, cut_at=10_000))
    url = f"https://127.0.0.1:{tls_server.port}{path}"
    transport = MediaTransport(pool_size=1)
    assert fetch(transport, url, tmp_path / "1.part").size == len(JPEG)
    with open_following_redirects(transport, url, HEADERS, timeouts=POLICY.timeouts, url_policy=LOCAL,
                                  max_redirects=2) as response:
        assert isinstance(response.raw, KeptAliveResponse)
        assert response.raw.read() == JPEG
        response.raw.release_conn()
    with pytest.raises(CrawlError) as caught:
        fetch(transport, url, tmp_path / "3.part")
    assert caught.value.error_class is ErrorClass.TRUNCATED_BODY
    assert (tmp_path / "3.part").read_bytes() == JPEG[:10_000]
    one_connection(tls_server, path)


@pytest.mark.parametrize("bad", [{"X-Injected": "a\r\nX-Evil: 1"}, {"Bad:Name": "x"}, {"X-Lf": "a\nX-Evil: 1"}],
                         ids=["crlf-in-value", "colon-in-name", "lf-in-value"])
def test_a_header_refused_on_a_new_connection_is_refused_on_a_reused_one(server, tmp_path, bad):
    """kept_alive.py writes a header set's lines once, through putheader itself: what
    putheader refuses on urllib3's first GET it refuses on the lean one, every time (a
    refusal is not remembered as lines), nothing is sent, and the connection stays usable."""
    url = server.route("/a.jpg", Reply(JPEG), Reply(JPEG))
    with pytest.raises(ValueError):
        download_to_part(MediaTransport(pool_size=1), DownloadRequest(url, tmp_path / "new.part", headers=bad), POLICY)
    transport = MediaTransport(pool_size=1)
    assert fetch(transport, url, tmp_path / "1.part").size == len(JPEG)
    for attempt in range(2):
        with pytest.raises(ValueError):
            download_to_part(transport, DownloadRequest(url, tmp_path / "2.part", headers=bad), POLICY)
    assert len(server.requests_to("/a.jpg")) == 1
    assert fetch(transport, url, tmp_path / "3.part").size == len(JPEG)
    one_connection(server, "/a.jpg")


def test_the_lean_get_sends_each_header_set_as_urllib3_sends_it(server, tmp_path):
    """Two header sets in turn on one kept-alive connection (the lines of each are
    remembered): each GET carries exactly its own set, as the first GET of a new connection does."""
    other = {"Accept": "image/*", "Host": f"127.0.0.1:{server.port}", "Accept-Encoding": "identity"}
    url = server.route("/a.jpg", *[Reply(JPEG)] * 5)
    for headers in (HEADERS, other):
        download_to_part(MediaTransport(pool_size=1), DownloadRequest(url, tmp_path / "new.part", headers=headers),
                         POLICY)
    transport = MediaTransport(pool_size=1)
    for headers in (HEADERS, other, HEADERS):
        download_to_part(transport, DownloadRequest(url, tmp_path / "r.part", headers=headers), POLICY)
    sent = [entry.headers for entry in server.requests_to("/a.jpg")]
    assert sent[2] == sent[4] == sent[0] and sent[3] == sent[1] != sent[0]


@pytest.mark.parametrize("value", ["21434", "0", "5, 5", " 5", "+5", "5 ", "-1", "x", "", "5, 6", "1_0", "5,,5"])
@pytest.mark.parametrize("transfer_encoding", [None, "chunked", "gzip, chunked"])
def test_the_lean_response_judges_the_body_length_as_urllib3_does(value, transfer_encoding):
    """kept_alive.py's `_body_length` (a plain length read at once, anything else as a
    list) says what urllib3's response says for the same headers, or refuses alike."""
    import http.client
    import io

    import urllib3
    from urllib3.exceptions import InvalidHeader

    from media_crawler.download.kept_alive import KeptAliveHeaders, _body_length
    from media_crawler.http import parse_response_headers

    headers = {"Content-Length": value} | ({"Transfer-Encoding": transfer_encoding} if transfer_encoding else {})
    block = "".join(f"{name}: {text}\r\n" for name, text in headers.items()).encode() + b"\r\n"

    def judged(read):
        try:
            return read()
        except InvalidHeader:
            return InvalidHeader

    theirs = judged(lambda: urllib3.HTTPResponse(body=io.BytesIO(b""), headers=headers, status=200,
                                                 preload_content=False, request_method="GET").length_remaining)
    response = http.client.HTTPResponse.__new__(http.client.HTTPResponse)
    response.status = 200
    ours = judged(lambda: _body_length(KeptAliveHeaders(parse_response_headers(io.BytesIO(block))), response))
    assert ours == theirs
