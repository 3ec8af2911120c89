"""sources.yaml's parsed copy (config_cache.py): a later process reads it instead of the YAML,
any edit of the file is a miss, and a copy that is not beyond doubt is ignored, not obeyed."""
from __future__ import annotations

import json
import os

import pytest
import yaml

from media_crawler import config as config_module
from media_crawler.config import load_config
from media_crawler.config_cache import FORMAT, cache_path, load_yaml
from media_crawler_tests.services import require_root

TEXT = "workers: 2\nsources:\n  - bilibili: user 12345\n  - weibo: user 679\n    api: ajax\n"


@pytest.fixture(autouse=True)
def fresh_process():
    """Each load as a new process would make it: without load_config's in-process parse."""
    config_module._parse_text.cache_clear()
    yield
    config_module._parse_text.cache_clear()


def no_yaml(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the YAML was parsed although the copy matches")
    monkeypatch.setattr(yaml, "load", refuse)


def write(tmp_path, text: str = TEXT):
    path = tmp_path / "sources.yaml"
    path.write_text(text)
    return path


def test_a_later_process_reads_the_parsed_copy_and_gets_the_same_configuration(tmp_path, monkeypatch):
    path = write(tmp_path)
    first = load_config(path)
    assert cache_path(path).exists() and oct(cache_path(path).stat().st_mode & 0o777) == "0o644"
    config_module._parse_text.cache_clear()
    no_yaml(monkeypatch)
    again = load_config(path)
    assert again.sources == first.sources and again.workers == 2
    assert again.sources[1].options == {"api": "ajax"}


def test_an_edit_of_any_byte_is_a_miss_and_the_copy_follows_the_file(tmp_path):
    path = write(tmp_path)
    load_config(path)
    path.write_text(TEXT.replace("workers: 2", "workers: 3"))
    config_module._parse_text.cache_clear()
    assert load_config(path).workers == 3
    assert json.loads(cache_path(path).read_text())["data"]["workers"] == 3


def tampered(path) -> None:
    """A copy matching the file's digest that says workers: 99."""
    body = json.loads(cache_path(path).read_text())
    body["data"]["workers"] = 99
    cache_path(path).write_text(json.dumps(body))


def test_a_copy_its_owner_wrote_is_used_which_is_why_only_the_owner_is_trusted(tmp_path):
    path = write(tmp_path)
    load_config(path)
    tampered(path)
    os.chmod(cache_path(path), 0o600)
    config_module._parse_text.cache_clear()
    assert load_config(path).workers == 99  # what the owner could have written into sources.yaml


def _group_writable(copy):
    os.chmod(copy, 0o666)


def _a_link(copy):
    target = copy.with_name("elsewhere.json")
    os.replace(copy, target)
    os.symlink(target, copy)


def _not_ours(copy):
    require_root("giving a file to another user needs root")
    os.chown(copy, 65534, 65534)
    os.chmod(copy, 0o644)


def _a_fifo(copy):
    copy.unlink()
    os.mkfifo(copy)  # an open() that waited for a writer would hang every load


def _truncated(copy):
    copy.write_bytes(copy.read_bytes()[:20])


def _another_format(copy):
    body = json.loads(copy.read_text())
    copy.write_text(json.dumps({**body, "format": FORMAT + 1}))


def _another_text(copy):
    body = json.loads(copy.read_text())
    copy.write_text(json.dumps({**body, "sha256": "0" * 64}))


def _too_big(copy):
    body = json.loads(copy.read_text())
    copy.write_text(json.dumps(body) + " " * 100_000)


def _not_json_data(copy):
    body = json.loads(copy.read_text())
    copy.write_text(json.dumps({**body, "data": {"workers": 1e999}}))


def _overflowing_number(copy):
    copy.write_text(copy.read_text().replace('"workers": 99', '"workers": 1e400'))


@pytest.mark.parametrize("spoil", [_group_writable, _a_link, _not_ours, _a_fifo, _truncated, _another_format,
                                   _another_text, _too_big, _not_json_data, _overflowing_number])
def test_a_copy_in_doubt_is_ignored_and_the_yaml_decides(tmp_path, spoil):
    path = write(tmp_path)
    load_config(path)
    tampered(path)
    spoil(cache_path(path))
    config_module._parse_text.cache_clear()
    assert load_config(path).workers == 2


def test_an_unquoted_day_comes_back_from_the_copy_as_a_day(tmp_path, monkeypatch):
    path = write(tmp_path, "partitions: {start_day: 2026-11-20}\nsources: []\n")
    first = load_config(path)
    config_module._parse_text.cache_clear()
    no_yaml(monkeypatch)
    assert load_config(path).layout == first.layout and str(first.layout.start_day) == "2026-11-20"


@pytest.mark.parametrize("text", [
    "partitions: {start_day: 2026-11-20 10:00:00+08:00}\nsources: []\n",  # a timestamp: its zone
    "sources: []\n1: a number as a key\n",
    "sources: []\nstore: !!binary aGVsbG8=\n",
    'sources: []\nplatforms: {urls: {"!date": x}}\n',  # the copy's own tag, written by the user
    "sources: []\nworkers: .inf\n",
    "sources: []\nstore: 0x" + "f" * 4000 + "\n",  # an int str() refuses (past 4,300 digits)
])
def test_values_json_cannot_give_back_exactly_are_never_copied(tmp_path, text):
    path = write(tmp_path, text)
    assert load_yaml(path, text) == yaml.safe_load(text)
    assert not cache_path(path).exists()


def test_a_file_of_another_user_gets_no_copy_and_a_copy_beside_it_is_ignored(tmp_path):
    # A service reading an operator's sources.yaml must not obey a copy the service's own
    # user could write.
    require_root("giving a file to another user needs root")
    path = write(tmp_path)
    load_config(path)
    tampered(path)  # a copy of this process's user, digest right, workers: 99
    os.chmod(cache_path(path), 0o644)
    os.chown(path, 65534, 65534)
    config_module._parse_text.cache_clear()
    assert load_config(path).workers == 2
    cache_path(path).unlink()
    config_module._parse_text.cache_clear()
    assert load_config(path).workers == 2 and not cache_path(path).exists()


def test_a_directory_it_may_not_write_is_parsed_every_time(tmp_path, monkeypatch):
    path = write(tmp_path)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr("media_crawler.config_cache.tempfile.mkstemp", refuse)
    assert load_config(path).workers == 2 and not cache_path(path).exists()
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["sources.yaml"]


def test_aliases_nesting_into_billions_of_values_are_not_walked_or_copied(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]  # 9^10 values
    text = "\n".join(lines) + "\n"
    path = write(tmp_path, text)
    data = load_yaml(path, text)
    assert len(data) == 10 and not cache_path(path).exists()
