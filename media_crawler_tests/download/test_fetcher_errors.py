"""download_to_part failures: documents as media, oversize bodies, unsafe URLs and redirects, stalls, statuses."""
from __future__ import annotations

import socket

import pytest

from media_crawler.download.fetcher import download_to_part
from media_crawler.net.policy import UrlPolicy
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import Timeouts
from media_crawler_tests.download.httpserver import Reply
from media_crawler_tests.download.support import ALLOWED, FAST, media_bytes, request_and_policy, sha256

HTML = b"<!DOCTYPE html><html><head><title>Login</title></head><body>please log in</body></html>" * 20


def fetch(session, url, part, **options):
    options.setdefault("max_bytes", 10_000_000)
    options.setdefault("url_policy", ALLOWED)
    options.setdefault("timeouts", FAST)
    request, policy, rest = request_and_policy(url, part, **options)
    return download_to_part(session, request, policy, **rest)


def error_of(call) -> CrawlError:
    with pytest.raises(CrawlError) as caught:
        call()
    return caught.value


@pytest.mark.parametrize(
    "body, content_type",
    [
        (HTML, "text/html; charset=utf-8"),
        (HTML, "image/jpeg"),  # the label lies, the bytes do not
        (b'  {"code": -403, "message": "access denied"}', "application/json"),
        (b"<?xml version='1.0'?><Error><Code>AccessDenied</Code></Error>", "application/xml"),
        (b"\x00\x01 unknown binary", "text/html"),  # no media signature under a document label
    ],
)
def test_a_document_where_media_was_expected_is_bad_signature_and_leaves_no_part(server, session, part, body, content_type):
    url = server.route("/img.jpg", Reply(body, content_type=content_type))

    error = error_of(lambda: fetch(session, url, part))

    assert error.error_class is ErrorClass.BAD_SIGNATURE
    assert not part.exists()


def test_real_media_under_a_wrong_content_type_is_kept(server, session, part):
    body = media_bytes(5000)
    url = server.route("/img.jpg", Reply(body, content_type="text/html"))
    assert fetch(session, url, part).sha256 == sha256(body)


def test_oversize_by_content_length_is_rejected_before_reading(server, session, part):
    url = server.route("/big.mp4", Reply(media_bytes(2_000_000)))

    error = error_of(lambda: fetch(session, url, part, max_bytes=1_000_000))

    assert error.error_class is ErrorClass.TOO_LARGE and "2000000" in error.message
    assert not part.exists()


def test_oversize_by_streamed_count_is_rejected_while_reading(server, session, part):
    url = server.route("/big.mp4", Reply(media_bytes(2_000_000), send_length=False))

    error = error_of(lambda: fetch(session, url, part, max_bytes=600_000))

    assert error.error_class is ErrorClass.TOO_LARGE
    assert not part.exists()


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/a.jpg", "http://169.254.169.254/latest/"])
def test_disallowed_urls_are_refused_without_a_request(session, part, url):
    error = error_of(lambda: fetch(session, url, part))
    assert error.error_class is ErrorClass.DISALLOWED_URL


def test_an_unlisted_public_host_is_host_not_allowed_without_a_request(session, part):
    error = error_of(lambda: fetch(session, "http://example.com/a.jpg", part))
    assert error.error_class is ErrorClass.HOST_NOT_ALLOWED and "example.com" in error.message
    assert not error.policy.retryable and error.policy.final_state.value == "failed"  # not gone: re-runs fetch it


def test_a_redirect_to_an_unlisted_cdn_host_is_host_not_allowed(server, session, part):
    """A platform moving its media to a CDN host not listed: the settings' matter, named as such."""
    url = server.route("/start", Reply(redirect_to="https://new-cdn.example.net/a.jpg"))
    error = error_of(lambda: fetch(session, url, part))
    assert error.error_class is ErrorClass.HOST_NOT_ALLOWED and "new-cdn.example.net" in error.message


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://localhost:{port}/final"])
def test_a_redirect_to_an_internal_host_is_refused(server, session, part, target):
    target = target.format(port=server.port)
    url = server.route("/start", Reply(redirect_to=target))
    server.route("/final", Reply(media_bytes(100)))

    error = error_of(lambda: fetch(session, url, part))

    assert error.error_class is ErrorClass.DISALLOWED_URL
    assert server.requests_to("/final") == []


def test_redirects_on_allowed_hosts_are_followed_and_credentials_stay_behind(server, session, part):
    body = media_bytes(3000)
    url = server.route("/start", Reply(redirect_to=server.url("/hop")))
    server.route("/hop", Reply(redirect_to=server.url("/final", host="localhost")))
    server.route("/final", Reply(body))

    result = fetch(session, url, part, headers={"Cookie": "SESSDATA=secret"}, url_policy=UrlPolicy.from_entries(["127.0.0.1:*", "localhost:*"]))

    assert result.sha256 == sha256(body)
    assert server.requests_to("/hop")[0].headers["Cookie"] == "SESSDATA=secret"  # same host keeps it
    assert "Cookie" not in server.requests_to("/final")[0].headers  # another host does not get it


def test_redirects_are_bounded(server, session, part):
    url = server.route("/loop", Reply(redirect_to="/loop"))
    error = error_of(lambda: fetch(session, url, part, max_redirects=3))
    assert error.error_class is ErrorClass.DISALLOWED_URL
    assert len(server.requests_to("/loop")) == 4


def test_a_stalled_body_is_a_network_timeout_and_keeps_its_bytes(server, session, part):
    url = server.route("/slow.mp4", Reply(media_bytes(100_000), etag='"v1"', stall_at=40_000))

    # The read timeout (time to the headers) outlasts the server's stall (it drops the connection
    # after httpserver.STALL_LIMIT_S): only the stall limit between chunks makes this a timeout.
    error = error_of(lambda: fetch(session, url, part, timeouts=Timeouts(connect=1.0, read=30.0, stall=0.3)))

    assert error.error_class is ErrorClass.NETWORK_TIMEOUT
    assert part.stat().st_size == 40_000  # resumable by the next attempt


def test_a_body_cut_before_any_byte_is_a_connection_reset(server, session, part):
    url = server.route("/v.mp4", Reply(media_bytes(10_000), cut_at=0))
    assert error_of(lambda: fetch(session, url, part)).error_class is ErrorClass.CONNECTION_RESET


def test_a_refused_connection_is_connection_refused_an_outage_class(session, part):
    from media_crawler.errors import OUTAGE_CLASSES, policy_for

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = error_of(lambda: fetch(session, f"http://127.0.0.1:{port}/a.jpg", part))
    assert error.error_class is ErrorClass.CONNECTION_REFUSED
    assert error.policy.retryable and ErrorClass.CONNECTION_REFUSED in OUTAGE_CLASSES
    assert OUTAGE_CLASSES == {c for c in ErrorClass if policy_for(c).outage}  # one table decides


@pytest.mark.parametrize(
    "status, headers, expected_class, retry_after",
    [
        (404, {}, ErrorClass.NOT_FOUND, None),
        (410, {}, ErrorClass.NOT_FOUND, None),
        (400, {}, ErrorClass.NOT_FOUND, None),
        (403, {}, ErrorClass.URL_EXPIRED, None),
        (401, {}, ErrorClass.AUTH, None),
        (429, {"Retry-After": "7"}, ErrorClass.RATE_LIMITED, 7.0),
        (503, {"Retry-After": "3"}, ErrorClass.HTTP_5XX, 3.0),
        (500, {}, ErrorClass.HTTP_5XX, None),
    ],
)
def test_statuses_map_onto_error_classes(server, session, part, status, headers, expected_class, retry_after):
    url = server.route("/x.jpg", Reply(b"nope", status=status, headers=headers, content_type="text/plain"))

    error = error_of(lambda: fetch(session, url, part))

    assert (error.error_class, error.http_status, error.retry_after) == (expected_class, status, retry_after)


@pytest.mark.parametrize(
    "reply",
    [Reply(b"gone", status=404), Reply(media_bytes(50_000), cut_at=10_000), Reply(HTML, content_type="text/html")],
)
def test_error_messages_never_carry_the_query_string(server, session, part, reply):
    url = server.route("/signed.mp4", reply) + "?deadline=1&upsig=SECRET-SIGNATURE&token=abc"

    error = error_of(lambda: fetch(session, url, part))

    assert "SECRET" not in str(error) and "upsig" not in str(error) and "token" not in str(error)
