"""The media path's GET goes to urllib3 through download/media_transport.py: pinned pools,
the environment's proxy, no cookie jar, failures classified without the URL's secrets."""
from __future__ import annotations

import base64
import socket
import threading

import pytest

from media_crawler.download.fetcher import download_to_part
from media_crawler.download.media_transport import MediaTransport
from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.download.responses import open_following_redirects
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import Timeouts
from media_crawler.sessions import make_session
from media_crawler.net.policy import UrlPolicy
from media_crawler.platforms.transport import RequestsTransport
from media_crawler_tests.download.httpserver import Reply

LOCAL = UrlPolicy.from_entries(["*", "127.0.0.1:*"])
HEADERS = {"Referer": "https://www.bilibili.com/", "Accept-Encoding": "identity", "User-Agent": "mc-test"}
JPEG = b"\xff\xd8\xff" + b"x" * 5000
PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
                   "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def get(session, url, headers=HEADERS, timeouts=Timeouts()):
    return open_following_redirects(session, url, headers, timeouts=timeouts, url_policy=LOCAL, max_redirects=2)


def test_the_request_carries_its_headers_and_reuses_the_connection(server):
    url = server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg"))
    transport = MediaTransport(pool_size=2)
    for _ in range(2):
        with get(transport, url) as response:
            assert response.status_code == 200 and response.headers.get("content-type") == "image/jpeg"
            assert response.raw.read() == JPEG
            response.raw.release_conn()
    first, second = server.requests_to("/a.jpg")
    assert first.client_port == second.client_port  # one keep-alive connection
    assert first.headers["Referer"] == "https://www.bilibili.com/" and first.headers["User-Agent"] == "mc-test"
    assert first.headers["Accept-Encoding"] == "identity" and first.headers["Accept"] == "*/*"


def test_the_request_s_own_accept_replaces_the_default(server):
    url = server.route("/e.jpg", Reply(JPEG, content_type="image/jpeg"))
    with get(MediaTransport(), url, headers={**HEADERS, "accept": "image/*"}):
        pass
    sent = [(name.lower(), value) for name, value in server.requests_to("/e.jpg")[0].headers.items()]
    assert [value for name, value in sent if name == "accept"] == ["image/*"]


def test_a_download_without_an_adapter_user_agent_names_the_crawler(server):
    url = server.route("/u.jpg", Reply(JPEG, content_type="image/jpeg"))
    with get(MediaTransport(), url, headers={"Accept-Encoding": "identity"}):
        pass
    assert server.requests_to("/u.jpg")[0].headers["User-Agent"].startswith("media-crawler/")


def test_the_environment_may_name_a_private_ca_bundle(monkeypatch, tmp_path):
    from media_crawler.environment import ca_bundle_override

    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    assert ca_bundle_override() is None
    monkeypatch.setenv("CURL_CA_BUNDLE", str(tmp_path / "corp.pem"))
    assert ca_bundle_override() == str(tmp_path / "corp.pem")


def test_a_session_from_make_session_downloads_through_its_media_transport(server, tmp_path):
    url = server.route("/b.jpg", Reply(JPEG, content_type="image/jpeg"))
    with make_session(pool_size=2) as session:
        result = download_to_part(session, DownloadRequest(url, tmp_path / "b.part"),
                                  DownloadPolicy(max_bytes=10**6, url_policy=LOCAL))
    assert result.size == len(JPEG)


def test_cookies_the_api_collects_never_ride_on_media_downloads(server, tmp_path):
    """The API path keeps its cookie jar (as requests' Session.send would); the media
    path sends only the headers the adapter asked for."""
    api = server.route("/api", Reply(b"{}", content_type="application/json",
                                     headers={"Set-Cookie": "SESSDATA=api-secret; Path=/"}))
    media = server.route("/c.jpg", Reply(JPEG, content_type="image/jpeg"))
    with make_session(pool_size=2) as session:
        RequestsTransport(session, policy_for=lambda _platform: LOCAL).get("urls", api)
        assert session.cookies.get("SESSDATA") == "api-secret"
        download_to_part(session, DownloadRequest(media, tmp_path / "c.part"),
                         DownloadPolicy(max_bytes=10**6, url_policy=LOCAL))
    assert "Cookie" not in server.requests_to("/c.jpg")[0].headers


def test_the_environment_proxy_gets_the_absolute_url_and_its_credentials(server, monkeypatch):
    proxy = server.url("").replace("http://", "http://agent:p%40ss@")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    server.route("/via-proxy.jpg", Reply(JPEG, content_type="image/jpeg"))
    with get(MediaTransport(), "http://media.example.test/via-proxy.jpg") as response:
        assert response.status_code == 200 and response.raw.read() == JPEG
    (logged,) = server.requests_to("/via-proxy.jpg")
    assert logged.headers["Host"] == "media.example.test"
    sent = {name.lower(): value for name, value in logged.headers.items()}
    assert sent["proxy-authorization"] == "Basic " + base64.b64encode(b"agent:p@ss").decode()


def test_no_proxy_sends_the_request_direct(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    url = server.route("/direct.jpg", Reply(JPEG, content_type="image/jpeg"))
    with get(MediaTransport(), url) as response:
        assert response.status_code == 200


def test_the_proxy_choice_is_read_once_per_origin(monkeypatch):
    transport = MediaTransport()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert transport.proxy_for("https://cdn.example.org/a.jpg") == "http://proxy.internal:3128"
    assert transport.proxy_for("http://127.0.0.1:9/a.jpg") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://other:1")
    assert transport.proxy_for("https://cdn.example.org/b.jpg") == "http://proxy.internal:3128"


def test_through_a_proxy_every_hop_is_judged_and_its_proxy_looked_up_once(server, monkeypatch):
    """Through a proxy, each hop's target name is resolved and judged before anything is
    sent (a redirect to a name resolving internally is refused), and the hop's proxy is
    looked up once, for that check and the transport alike."""
    monkeypatch.setenv("HTTP_PROXY", server.url(""))
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *rest, **kw: real(
        "127.0.0.1" if host == "inside.example.test" else host, *rest, **kw))
    server.route("/hop.jpg", Reply(redirect_to="http://inside.example.test/x.jpg"))
    server.route("/x.jpg", Reply(JPEG, content_type="image/jpeg"))
    transport, looked_up = MediaTransport(), []
    proxy_for = transport.proxy_for
    monkeypatch.setattr(transport, "proxy_for", lambda url: looked_up.append(url) or proxy_for(url))
    with pytest.raises(CrawlError) as caught:
        open_following_redirects(transport, "http://media.example.test/hop.jpg", HEADERS, timeouts=Timeouts(),
                                 url_policy=UrlPolicy.from_entries(["*"]), max_redirects=2)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL and "internal address" in caught.value.message
    assert len(server.requests_to("/hop.jpg")) == 1 and server.requests_to("/x.jpg") == []
    assert looked_up == ["http://media.example.test/hop.jpg", "http://inside.example.test/x.jpg"]


def test_the_api_transport_reads_the_environment_once_per_origin(server, monkeypatch):
    """requests' environment settings (proxies, CA bundle) are read once per origin,
    not once or twice per API call (the pinning check reads the proxy too)."""
    with make_session(pool_size=2) as session:
        reads = []
        merge = session.merge_environment_settings
        monkeypatch.setattr(session, "merge_environment_settings", lambda url, *rest: reads.append(url) or merge(url, *rest))
        transport = RequestsTransport(session, policy_for=lambda _platform: LOCAL)
        for n in range(3):
            assert transport.get("urls", server.route(f"/api{n}", Reply(b"{}", content_type="application/json"))).status == 200
    assert len(reads) == 1


def test_connection_failures_are_classified_without_the_query():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(CrawlError) as info:
        get(MediaTransport(), f"http://127.0.0.1:{port}/a.jpg?token=secret", timeouts=Timeouts(connect=2))
    assert info.value.error_class is ErrorClass.CONNECTION_REFUSED and "secret" not in info.value.message


def test_closing_the_session_closes_the_media_pools(server):
    url = server.route("/d.jpg", Reply(JPEG, content_type="image/jpeg"))
    session = make_session(pool_size=2)
    with get(session, url) as response:
        response.raw.read()
        response.raw.release_conn()
    session.close()
    with get(session, url) as response:  # a closed transport opens fresh pools on demand
        assert response.status_code == 200
    assert len({logged.client_port for logged in server.requests_to("/d.jpg")}) == 2


def test_a_dropped_connection_is_not_retried_by_urllib3():
    """One failure, one request: retries are the error taxonomy's (download/retry.py), never urllib3's."""
    accepted = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]

        def hang_up():
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                accepted.append(connection)
                connection.close()

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        with pytest.raises(CrawlError) as info:
            get(MediaTransport(), f"http://127.0.0.1:{port}/a.jpg", timeouts=Timeouts(connect=2, read=2))
        thread.join(timeout=2)
    assert info.value.error_class is ErrorClass.CONNECTION_RESET and len(accepted) == 1





def test_after_close_the_transport_opens_new_pools(server):
    # The transport remembers each origin's pool; close() must make it forget them.
    url = server.route("/p.jpg", Reply(JPEG, content_type="image/jpeg"))
    transport = MediaTransport(pool_size=1)

    def fetch():
        with get(transport, url) as response:
            assert response.status_code == 200 and response.raw.read() == JPEG
            response.raw.release_conn()

    fetch()
    fetch()
    transport.close()
    fetch()
    fetch()
    ports = [request.client_port for request in server.requests_to("/p.jpg")]
    assert len(ports) == 4 and ports[1] == ports[0] and ports[2] != ports[0] and ports[3] == ports[2]
