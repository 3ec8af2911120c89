"""download_to_part resume: Range + If-Range after a cut, validator changes, servers ignoring Range, 416."""
from __future__ import annotations

import pytest

from media_crawler.download.fetcher import download_to_part
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler_tests.download.httpserver import Reply
from media_crawler_tests.download.support import ALLOWED, FAST, media_bytes, request_and_policy, sha256

SIZE = 700_000  # spans several 256 KiB chunks


def fetch(session, url, part, **options):
    options.setdefault("max_bytes", 10 * SIZE)
    request, policy, rest = request_and_policy(url, part, timeouts=FAST, url_policy=ALLOWED, **options)
    return download_to_part(session, request, policy, **rest)


def cut_then_capture_validator(session, url, part):
    """Run the first (cut) attempt; return the validator it reported."""
    seen = []
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part, on_validator=seen.append)
    assert caught.value.error_class in (ErrorClass.TRUNCATED_BODY, ErrorClass.CONNECTION_RESET)
    return seen[-1]


def test_whole_body_lands_in_the_part_with_its_hash(server, session, part):
    body = media_bytes(SIZE)
    url = server.route("/img.jpg", Reply(body, etag='"v1"', content_type="image/jpeg"))

    result = fetch(session, url, part)

    assert part.read_bytes() == body
    assert (result.sha256, result.size, result.resumed_from, result.bytes_received) == (sha256(body), SIZE, 0, SIZE)
    assert (result.etag, result.validator, result.content_type) == ('"v1"', '"v1"', "image/jpeg")
    # What the archive keeps of the answer (the ledger's media_response): the headers it sent, no
    # Last-Modified key for a header it did not send.
    assert result.date and result.response_said() == {"status": 200, "content_type": "image/jpeg", "etag": '"v1"',
                                                      "date": result.date}


@pytest.mark.parametrize("cut_at", [1, 1000, 256 * 1024, 256 * 1024 + 1, 500_000, SIZE - 1])
def test_resume_after_a_cut_continues_from_the_part_offset(server, session, part, cut_at):
    body = media_bytes(SIZE)
    url = server.route("/v.mp4", Reply(body, etag='"v1"', cut_at=cut_at), Reply(body, etag='"v1"'))

    validator = cut_then_capture_validator(session, url, part)
    assert part.stat().st_size == cut_at
    result = fetch(session, url, part, validator=validator)

    assert result.sha256 == sha256(body) and part.read_bytes() == body
    assert result.resumed_from == cut_at and result.bytes_received == SIZE - cut_at
    resumed = server.requests_to("/v.mp4")[1]
    assert resumed.headers["Range"] == f"bytes={cut_at}-" and resumed.headers["If-Range"] == '"v1"'
    assert resumed.status == 206
    assert server.body_bytes_sent("/v.mp4") < 1.2 * SIZE


def test_validator_change_mid_resume_restarts_from_zero(server, session, part):
    old, new = media_bytes(SIZE, seed=1), media_bytes(SIZE + 10, seed=2)
    url = server.route("/v.mp4", Reply(old, etag='"v1"', cut_at=300_000), Reply(new, etag='"v2"'))

    validator = cut_then_capture_validator(session, url, part)
    result = fetch(session, url, part, validator=validator)

    assert server.requests_to("/v.mp4")[1].status == 200  # If-Range "v1" no longer matches
    assert result.resumed_from == 0 and result.sha256 == sha256(new)
    assert part.read_bytes() == new  # no splice of old prefix and new tail
    assert result.validator == '"v2"'


def test_server_ignoring_range_restarts_from_zero(server, session, part):
    body = media_bytes(SIZE)
    url = server.route("/v.mp4", Reply(body, etag='"v1"', cut_at=400_000), Reply(body, etag='"v1"', honour_range=False))

    validator = cut_then_capture_validator(session, url, part)
    result = fetch(session, url, part, validator=validator)

    assert server.requests_to("/v.mp4")[1].status == 200
    assert result.resumed_from == 0 and result.sha256 == sha256(body) and part.read_bytes() == body


def test_last_modified_is_the_validator_when_there_is_no_strong_etag(server, session, part):
    body = media_bytes(SIZE)
    stamp = "Wed, 21 Oct 2026 07:28:00 GMT"
    url = server.route(
        "/v.mp4", Reply(body, etag='W/"weak"', last_modified=stamp, cut_at=1000), Reply(body, etag='W/"weak"', last_modified=stamp)
    )

    validator = cut_then_capture_validator(session, url, part)
    result = fetch(session, url, part, validator=validator)

    assert validator == stamp
    assert server.requests_to("/v.mp4")[1].headers["If-Range"] == stamp
    assert result.resumed_from == 1000 and result.sha256 == sha256(body)
    said = result.response_said()
    assert (said["status"], said["etag"], said["last_modified"]) == (206, 'W/"weak"', stamp)


def test_no_validator_means_no_resume(server, session, part):
    body = media_bytes(SIZE)
    url = server.route("/v.mp4", Reply(body, cut_at=1000), Reply(body))

    validator = cut_then_capture_validator(session, url, part)
    result = fetch(session, url, part, validator=validator)

    assert validator is None
    assert "Range" not in server.requests_to("/v.mp4")[1].headers
    assert result.resumed_from == 0 and part.read_bytes() == body


def test_416_on_a_complete_part_is_success_without_a_body(server, session, part):
    body = media_bytes(SIZE)
    url = server.route("/v.mp4", Reply(body, etag='"v1"'))
    part.parent.mkdir(parents=True)
    part.write_bytes(body)

    result = fetch(session, url, part, validator='"v1"')

    assert server.requests_to("/v.mp4")[0].status == 416
    assert result.sha256 == sha256(body) and result.bytes_received == 0 and result.size == SIZE
    assert result.response_said()["status"] == 416  # the answer that proved the part whole


def test_416_on_a_part_longer_than_the_file_restarts(server, session, part):
    body = media_bytes(1000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"'))
    part.parent.mkdir(parents=True)
    part.write_bytes(media_bytes(5000, seed=9))

    result = fetch(session, url, part, validator='"v1"')

    assert [r.status for r in server.requests_to("/v.mp4")] == [416, 200]
    assert result.sha256 == sha256(body) and part.read_bytes() == body


def test_consecutive_downloads_reuse_one_keep_alive_connection(server, session, tmp_path):
    url = server.route("/img.jpg", Reply(media_bytes(300_000)))
    for index in range(3):
        fetch(session, url, tmp_path / f"{index}.part")
    assert len({entry.client_port for entry in server.requests_to("/img.jpg")}) == 1


def test_a_new_version_is_announced_only_once_the_old_bytes_are_gone(server, session, part):
    """No moment exists where the new validator describes the old version's bytes."""
    old, new = media_bytes(5000, seed=1), media_bytes(6000, seed=2)
    url = server.route("/v.mp4", Reply(new, etag='"v2"'))
    part.parent.mkdir(parents=True)
    part.write_bytes(old)
    announced = []
    result = fetch(session, url, part, validator='"v1"',
                   on_validator=lambda value: announced.append((value, part.exists() and part.read_bytes())))
    assert announced == [('"v2"', b"")]  # the .part is open already, empty: none of the old bytes
    assert result.sha256 == sha256(new) and part.read_bytes() == new


@pytest.mark.parametrize("headers", [{"Content-Range": "bytes */5000", "ETag": '"v2"'}, {}],
                         ids=["416 naming another version", "416 without Content-Range"])
def test_a_416_that_does_not_prove_the_part_current_restarts(server, session, part, headers):
    """A 416 says the Range starts past the end; only a total equal to the .part's length, from
    the version the .part came from, makes the .part the whole file."""
    old, new = media_bytes(5000, seed=1), media_bytes(5000, seed=2)
    url = server.route("/v.mp4", Reply(status=416, headers=headers), Reply(new, etag='"v2"'))
    part.parent.mkdir(parents=True)
    part.write_bytes(old)
    result = fetch(session, url, part, validator='"v1"')
    assert [r.status for r in server.requests_to("/v.mp4")] == [416, 200]
    assert result.sha256 == sha256(new) and part.read_bytes() == new


def test_a_416_to_a_request_without_range_is_an_error(server, session, part):
    url = server.route("/v.mp4", Reply(status=416, headers={"Content-Range": "bytes */0"}))
    with pytest.raises(CrawlError):
        fetch(session, url, part)


def test_a_body_without_a_length_ends_with_the_connection(server, session, part):
    body = media_bytes(300_000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"', send_length=False))
    result = fetch(session, url, part)
    assert result.sha256 == sha256(body) and part.read_bytes() == body


def test_the_part_is_on_disk_whole_before_the_download_returns(server, session, part, monkeypatch):
    """The caller commits it next: its bytes are fsynced (a power cut after the ledger says
    downloaded must not leave a short .part under a whole file's hash)."""
    import os

    body = media_bytes(300_000)
    url = server.route("/v.mp4", Reply(body))
    synced = {}
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced[os.readlink(f"/proc/self/fd/{fd}")] = os.fstat(fd).st_size
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    fetch(session, url, part)
    assert synced[str(part)] == len(body)


def test_a_resume_announcing_more_than_the_limit_drops_the_part(server, session, part):
    body = media_bytes(2000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"'))
    part.parent.mkdir(parents=True)
    part.write_bytes(body[:1000])
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part, validator='"v1"', max_bytes=1500)
    assert caught.value.error_class is ErrorClass.TOO_LARGE
    assert server.requests_to("/v.mp4")[0].status == 206 and not part.exists()


@pytest.mark.parametrize("headers", [
    {"Content-Range": "bytes 0-999/2000"},  # starts elsewhere than the .part ends
    {},  # no range at all
    {"Content-Range": "bytes 1000-1999/2000", "Content-Encoding": "gzip"},  # encoded: its bytes are not the file's
], ids=["wrong start", "no Content-Range", "content-encoded"])
def test_a_206_that_does_not_continue_the_part_drops_it(server, session, part, headers):
    body = media_bytes(2000)
    url = server.route("/v.mp4", Reply(body[1000:], status=206, headers=headers))
    part.parent.mkdir(parents=True)
    part.write_bytes(body[:1000])
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part, validator='"v1"')
    assert caught.value.error_class is ErrorClass.TRUNCATED_BODY
    assert not part.exists(), "the next attempt starts clean, without a Range"


def test_a_file_of_exactly_the_limit_is_kept_whole_and_resumed(server, session, part):
    body = media_bytes(2000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"', cut_at=1000), Reply(body, etag='"v1"'))
    validator = cut_then_capture_validator(session, url, part)
    result = fetch(session, url, part, validator=validator, max_bytes=len(body))
    assert result.resumed_from == 1000 and part.read_bytes() == body


def test_a_resumed_body_is_not_sniffed_again_under_a_wrong_label(server, session, part):
    """The head was sniffed when the .part began; a CDN's text/html label on the rest is not a document."""
    body = media_bytes(SIZE)
    url = server.route("/v.mp4", Reply(body, etag='"v1"', cut_at=1000, content_type="text/html"),
                       Reply(body, etag='"v1"', content_type="text/html"))
    validator = cut_then_capture_validator(session, url, part)
    result = fetch(session, url, part, validator=validator)
    assert result.resumed_from == 1000 and part.read_bytes() == body


def test_a_416_without_validators_whose_total_is_the_part_keeps_the_part(server, session, part):
    """Many servers send no ETag on a 416: the total alone then says the .part is whole."""
    body = media_bytes(5000)
    url = server.route("/v.mp4", Reply(status=416, headers={"Content-Range": "bytes */5000"}))
    part.parent.mkdir(parents=True)
    part.write_bytes(body)
    result = fetch(session, url, part, validator='"v1"')
    assert result.sha256 == sha256(body) and result.bytes_received == 0
    assert len(server.requests_to("/v.mp4")) == 1


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate"])
def test_a_content_encoded_body_is_stored_decoded(server, session, part, encoding):
    import gzip
    import zlib

    body = media_bytes(300_000)
    packed = zlib.compress(body) if encoding == "deflate" else gzip.compress(body)
    url = server.route("/v.mp4", Reply(packed, headers={"Content-Encoding": encoding}))
    result = fetch(session, url, part)
    assert result.sha256 == sha256(body) and part.read_bytes() == body
    assert result.validator is None  # decoded bytes cannot be resumed by byte offset


def test_a_compressed_body_that_ends_early_is_truncated(server, session, part):
    import gzip

    packed = gzip.compress(media_bytes(300_000))
    url = server.route("/v.mp4", Reply(packed[: len(packed) // 2], headers={"Content-Encoding": "gzip"}))
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part)
    assert caught.value.error_class is ErrorClass.TRUNCATED_BODY


def test_a_validator_without_its_part_fetches_the_whole_file(server, session, part):
    """The ledger kept a validator but the .part is gone (the staging folder was swept): no Range."""
    body = media_bytes(2000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"'))
    result = fetch(session, url, part, validator='"v1"')
    assert "Range" not in server.requests_to("/v.mp4")[0].headers
    assert result.resumed_from == 0 and part.read_bytes() == body


def test_a_206_without_validators_keeps_the_validator_of_the_part_it_continues(server, session, part):
    body = media_bytes(2000)
    url = server.route("/v.mp4", Reply(body[1000:], status=206, headers={"Content-Range": "bytes 1000-1999/2000"}))
    part.parent.mkdir(parents=True)
    part.write_bytes(body[:1000])
    announced = []
    result = fetch(session, url, part, validator='"v1"', on_validator=announced.append)
    assert announced == ['"v1"'], "a cut of this attempt must still resume the same version"
    assert result.resumed_from == 1000 and part.read_bytes() == body


def test_the_staging_folders_are_made_when_missing(server, session, tmp_path):
    body = media_bytes(2000)
    url = server.route("/v.mp4", Reply(body))
    part = tmp_path / "home" / "staging" / "item-1.part"
    fetch(session, url, part)
    assert part.read_bytes() == body


def test_errors_name_the_url_the_redirect_led_to(server, session, part):
    url = server.route("/start", Reply(redirect_to="/big.mp4"))
    server.route("/big.mp4", Reply(media_bytes(5000)))
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part, max_bytes=1000)
    assert caught.value.error_class is ErrorClass.TOO_LARGE and "/big.mp4" in caught.value.message


def test_short_writes_are_continued_until_every_byte_is_in_the_part(server, session, part, monkeypatch):
    """A raw file may take fewer bytes than offered (a signal, a nearly full disk): the rest follows."""
    import io

    import media_crawler.download.fetcher as fetcher

    class ShortWrites(io.FileIO):
        taken = 0

        def write(self, data) -> int:
            ShortWrites.taken += min(len(data), 1000)
            assert ShortWrites.taken <= 2 * len(body), "the same bytes written again and again"
            return super().write(bytes(data[:1000]))

    def short_open(path, mode="r", buffering=-1, **kwargs):
        return ShortWrites(path, mode.replace("b", "")) if "b" in mode and "r" not in mode else open(path, mode)

    body = media_bytes(300_000)
    monkeypatch.setattr(fetcher, "open", short_open, raising=False)  # the module's own open(): the .part's
    url = server.route("/v.mp4", Reply(body))
    result = fetch(session, url, part)
    assert part.read_bytes() == body and result.sha256 == sha256(body)


def test_a_body_in_another_encoding_than_its_label_is_refused(server, session, part):
    import zlib

    url = server.route("/v.mp4", Reply(zlib.compress(media_bytes(3000)), headers={"Content-Encoding": "gzip"}))
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part)  # zlib-wrapped bytes labelled gzip: not what was sent, not stored
    assert caught.value.error_class is ErrorClass.TRUNCATED_BODY and "broken compressed body" in caught.value.message
