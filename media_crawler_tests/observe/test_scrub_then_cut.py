"""Scrub, then cut (issue 26, item 12): a hostile URL-list feed answers an HTML page that
echoes the Bilibili SESSDATA at the places where the crawler shortens what it quotes (the
80-character snippet of a body that is not JSON, the 4096-character raw body a
parse_error keeps, `failures`' 160-character reason). Not even the start of the secret,
six characters of any of its encodings, reaches the ledger, Dagster's run storage or
compute logs (every file of the home), `failures` or the crawl's output."""
from __future__ import annotations

import base64
from urllib.parse import quote, unquote

import pytest
import yaml

from media_crawler.cli import main as cli_main
from media_crawler.scrub import MASK, excerpt, register_secret
from media_crawler_tests.one_answer_server import one_answer_server

DAY = "2026-11-27"
# Bilibili's SESSDATA form: <hex>%2C<expiry, unix seconds>%2C<hash>%2A<tail>.
SESSDATA = "3fa2c9d1%2C1767225600%2Cb7e4a%2Ac1Zx"
PREFIX = 6  # scrub.MIN_SECRET_LENGTH: a shorter start of a secret is no secret


def starts(secret: str) -> set[str]:
    """The first PREFIX characters of each encoding of `secret` (computed here, not by the
    scrubber under test): any longer piece of the secret's start contains one of them."""
    raw = secret.encode()
    forms = {secret, unquote(secret), quote(secret, safe=""), quote(unquote(secret), safe=""),
             base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    return {form[:PREFIX] for form in forms}


def hostile_page() -> bytes:
    """An HTML page echoing the secret across the 80th and the 4096th character."""
    head = "<html><body><p>risk control: your session " + "." * 20
    middle = f" expires. {'x' * 3950} cookie "
    page = head + SESSDATA + middle
    page += "y" * (4096 - len(page) - 10) + "SESSDATA=" + SESSDATA + "</p></body></html>"
    assert len(head) < 80 < len(head) + len(SESSDATA) and len(page) - len(SESSDATA) - 18 < 4096
    return page.encode()


def test_excerpt_masks_the_start_of_a_secret_left_at_the_cut():
    register_secret(SESSDATA)
    already_cut = f"answer: {SESSDATA}"[:25]  # someone else cut first: 17 characters of the secret
    assert excerpt(already_cut, 100) == f"answer: {MASK}"
    assert excerpt(f"answer: {SESSDATA} more", 20) == f"answer: {MASK} more"[:20]
    assert excerpt("answer: 3fa2c", 100) == "answer: 3fa2c", "five characters are no secret's start"
    assert excerpt(f"{unquote(SESSDATA)} and more", 12) == MASK + " and more"[:9]


@pytest.fixture
def hostile_feed():
    with one_answer_server(200, hostile_page(), {"Content-Type": "text/html"}) as origin:
        yield origin


def test_no_start_of_an_echoed_secret_survives_a_cut(crawl_home, hostile_feed, monkeypatch, capsys, caplog):
    monkeypatch.setenv("BILIBILI_SESSDATA", SESSDATA)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the crawl keeps its Dagster home inside the home
    crawl_home.mkdir(parents=True, exist_ok=True)
    config = crawl_home.parent / "sources.yaml"  # the user's file, outside the searched home
    config.write_text(yaml.safe_dump({"sources": [{"urls": f"{hostile_feed}/feed.json"}],
                                      "allow_hosts": [hostile_feed], "store": str(crawl_home / "store"),
                                      "ledger_url": f"sqlite:///{crawl_home / 'ledger.db'}"}))
    for command in (["crawl", "--day", DAY], ["failures"], ["failures", "--json"]):
        try:
            cli_main([*command, "--config", str(config)])
        except SystemExit:
            pass
    output = capsys.readouterr()
    assert "parse_error" in output.out, output.out
    assert (crawl_home / "dagster_home").is_dir(), "the run storage searched below is the crawl's"

    places = {"stdout": output.out.encode(), "stderr": output.err.encode(), "logs": caplog.text.encode()}
    places.update({str(path.relative_to(crawl_home)): path.read_bytes()
                   for path in sorted(crawl_home.rglob("*")) if path.is_file()})
    assert any(b"risk control" in data for name, data in places.items() if "ledger" in name), \
        "the ledger keeps the (scrubbed) body: the echo went where the test looks"
    leaks = [(name, start) for name, data in places.items() for start in starts(SESSDATA) if start.encode() in data]
    assert leaks == []
