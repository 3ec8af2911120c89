"""net/targets.py takes a plain URL apart with one pattern (`_PLAIN_URL`) instead of its
step by step split (`_split`): for every URL the pattern takes, the split reads the same
scheme, authority and tail, so the Target (or the refusal) is the one the steps make."""
from __future__ import annotations

import re

import pytest

from media_crawler.errors import CrawlError
from media_crawler.net import targets
from media_crawler_tests.net.hostile_urls import corpus

ORDINARY = [
    "http://127.0.0.1:8799/small/s_00000.jpg",
    "https://cdn.example.com/a/b.jpg?sig=abc&exp=1",
    "https://cdn.example.com:443/a",
    "https://cdn.example.com:8443/a?x=[1]",
    "http://[::1]:8080/v6",
    "http://cdn.example.com./trailing-dot",
    "http:///no-host",
    "http://cdn.example.com:0/port-zero",
    "http://cdn.example.com:99999/port-too-big",
    "http://a:b@cdn.example.com/userinfo",
    "http://cdn.example.com/p%20q",  # a `%`: the split requotes it
    "http://cdn.example.com/p q",  # a blank: requoted
    "http://cdn.example.com/a#fragment",
    "http://cdn.example.com?query-without-path",
    "HTTP://CDN.EXAMPLE.COM/upper",
    "http://CDN.example.com/mixed-case-host",
    "http://xn--bcher-kva.example/idna",
    "http://bücher.example/unicode",
    "http://cdn.example.com/ünïcode-path",
    "http://cdn.example.com/a\\b",
]


def outcome(parse, url):
    try:
        return parse(url)
    except CrawlError as error:
        return (error.error_class, error.message)


@pytest.mark.parametrize("url", ORDINARY + [url for _, url in corpus(1)])
def test_the_one_pattern_reads_a_url_as_the_steps_read_it(url, monkeypatch):
    plain = targets._PLAIN_URL.fullmatch(url)
    if plain is not None:
        assert plain.groups() == targets._split(url)
    parsed = outcome(targets.parse_target, url)
    monkeypatch.setattr(targets, "_PLAIN_URL", re.compile("(?!)"))  # every URL through the steps
    assert outcome(targets.parse_target, url) == parsed


def test_ordinary_urls_take_the_one_pattern():
    assert all(targets._PLAIN_URL.fullmatch(url) for url in ORDINARY[:4])
