"""Bad configuration and bad input reach the user as one JSON line on stderr with an error class
(exit 2 for usage or configuration, 1 for data), never a traceback; unknown keys are refused by name."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from media_crawler.config import ConfigError, config_from_dict, load_config

MEDIA_BIN = Path(sys.executable).with_name("media-crawler")


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "named"), [
    ("ledger: sqlite:///x.db\nsources: []\n", "'ledger'"),
    ("sources: []\nplatforms:\n  bilibili: {max_heigth: 720}\n", "'max_heigth'"),
    ("sources: []\nplatforms:\n  myspace: {}\n", "myspace"),
    ("sources: []\nworkers: two\n", "workers"),
    ("sources: []\nworkers: 0\n", "workers"),
    ("sources: []\nmax_item_bytes: 1e400\n", "max_item_bytes"),
    ("sources: []\nallow_hosts: [\"http://a\\\\@b/\"]\n", "allow_hosts"),
    ("sources: []\nplatforms:\n  weibo: {rate: .nan}\n", "rate"),
    ("sources: []\nplatforms:\n  facebook: {credential_env: [FB_ACCESS_TOKEN]}\n", "credential_env"),
    ("sources: []\nplatforms:\n  urls: {allow_unknown_formats: 'yes'}\n", "allow_unknown_formats"),
    ("sources: []\nplatforms:\n  bilibili: {api_base: 'gopher://x/'}\n", "api_base"),
    ("sources: [[1, 2]]\n", "source entry"),
    ("- just\n- a list\n", "mapping"),
    ("sources: [\n", "not valid YAML"),
])
def test_a_bad_configuration_is_refused_naming_what_is_wrong(tmp_path, text, named):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert named in str(caught.value)
    assert str(caught.value).count(str(path)) == 1, "the file is named, and once"


@pytest.mark.parametrize(("text", "message"), [
    ("sources: []\nplatforms:\n  bilibili: {max_height: -1}\n", "platforms.bilibili.max_height must be"),
    ("sources:\n  - {tiktok: user 1}\n", "source entry {'tiktok': 'user 1'} must name exactly one of"),
    ("sources:\n  - bilibili: usr 1\n", "cannot read source bilibili: 'usr 1'"),
])
def test_each_configuration_error_starts_with_the_file_once(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: {message}")
    assert str(caught.value).count(str(path)) == 1


def test_an_unknown_key_names_the_file_too(tmp_path):
    path = write(tmp_path, "ledger: x\nsources: []\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_a_valid_configuration_still_loads():
    config = config_from_dict({"sources": [{"bilibili": "user 1"}], "workers": 2, "allow_hosts": ["nas.local:8080"],
                               "platforms": {"urls": {"rate": 2, "burst": 4, "allow_unknown_formats": True}}})
    assert config.workers == 2 and config.settings_for("urls").options["rate"] == 2.0


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(MEDIA_BIN), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("args", [
    ("crawl", "--config", "missing.yaml", "--day", "2026-11-25"),
    ("export", "--config", "missing.yaml"),
    ("crawl", "--config", "bad.yaml", "--day", "2026-11-25"),
])
def test_commands_report_a_bad_configuration_as_one_json_line_and_exit_2(tmp_path, args):
    (tmp_path / "bad.yaml").write_text("ledger: x\nsources: []\n")
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    line = json.loads(result.stderr.strip().splitlines()[-1])
    assert line["error_class"] == "config_error" and line["command"] == args[0]


def test_normalize_of_a_broken_file_is_a_classified_line_not_a_traceback(tmp_path):
    broken = tmp_path / "answer.json"
    broken.write_text('{"code": 0, "data": {"list": {"vlist": [' + "[" * 5000)
    result = run("normalize", "bilibili", str(broken), cwd=tmp_path)
    assert result.returncode in (1, 2)
    assert "Traceback" not in result.stderr + result.stdout


def test_a_file_edited_between_loads_is_read_again_and_a_bad_edit_still_refused(tmp_path, monkeypatch):
    # load_config keeps the parse of the last texts it saw (a run worker loads the file twice);
    # any change of the text must be seen, a broken one refused as before, and the paths and
    # environment read on every load.
    path = write(tmp_path, "sources:\n  - bilibili: user 12345\n")
    first = load_config(path)
    assert [source.key for source in first.sources] == ["bilibili-12345"]
    path.write_text("sources:\n  - bilibili: user 12345\n  - weibo: user 679\n")
    assert [source.key for source in load_config(path).sources] == ["bilibili-12345", "weibo-679"]
    path.write_text("sources:\n  - bilibili: user 12345\n  - bilibili: user 12345\n")
    with pytest.raises(ConfigError, match="listed twice"):
        load_config(path)
    path.write_text("sources:\n  - bilibili: user 12345\n")
    monkeypatch.setenv("MEDIA_CRAWLER_LEDGER_URL", "sqlite:////elsewhere/ledger.db")
    again = load_config(path)  # the same text as the first load: its parse is reused
    assert again.sources == first.sources and again.ledger_url == "sqlite:////elsewhere/ledger.db"
    assert first.sources_in(first.layout.shard_of("bilibili-12345")) == list(first.sources)


# Nine aliases of nine: 9^10 values in ten short lines. repr() or str() of it never returns.
ALIAS_BOMB = "\n".join(["bomb0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
    f"bomb{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)])


HOSTILE = [  # (sources.yaml, what its one-line refusal names)
    ("sources:\n  - " + ALIAS_BOMB.replace("\n", "\n    ") + "\n  - *a9\n", "source entry"),
    ("sources:\n  - bilibili: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"    o{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)), "cannot read source bilibili"),
    ("sources:\n  - weibo: user 1\n    api: &a0 [x, x, x, x, x, x, x, x, x]\n", "api must be one of"),
    ("sources:\n  - bilibili: user 1\n    apii: ajax\n", "unknown option 'apii'"),
    ("sources: []\nplatforms:\n  bilibili:\n    credential_env: &a0 {x: [x, x, x, x, x, x, x, x, x]}\n", "credential_env"),
    ("sources: []\npartitions:\n  start_day: &a0 [x, x, x, x, x, x, x, x, x]\n", "start_day"),
    ("sources: []\n? " + "k" * 100_000 + "\n: 1\n", "unknown key"),
    ("sources: []\n" + "".join(f"k{i}: 1\n" for i in range(5000)), "and 4995 more"),
    ("sources: []\n? 0x" + "f" * 4000 + "\n: 1\n", "a number of 16000 bits"),
    ("sources: []\nworkers: 2026-02-30\n", "cannot be read"),
    ("sources: []\nallow_hosts: ['a" + ":*" * 3000 + "']\n", "allow_hosts"),
    ("sources:\n" + "".join(f"  - bilibili: user {i}\n  - bilibili: user {i}\n" for i in range(3000)),
     "and 2995 more"),
]

# Every case loaded in one child process (one interpreter start, not twelve): a hang fails on
# the timeout instead of stalling the suite, and any exception but ConfigError is a traceback.
CHILD = """
import json, sys
from media_crawler.config import ConfigError, load_config
for path in sys.argv[1:]:
    try:
        load_config(path)
        print(json.dumps({"loaded": path}))
    except ConfigError as error:
        print(json.dumps({"refused": str(error)}))
"""


@pytest.fixture(scope="module")
def hostile_refusals(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    paths = []
    for index, (text, _) in enumerate(HOSTILE):
        (folder / f"{index}").mkdir()
        paths.append(folder / f"{index}" / "sources.yaml")
        paths[-1].write_text(text)
    result = subprocess.run([sys.executable, "-c", CHILD, *map(str, paths)], capture_output=True, text=True,
                            timeout=120, cwd=folder)
    assert result.returncode == 0 and not result.stderr, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_configuration_is_refused_in_one_short_line(hostile_refusals, index):
    refusal = hostile_refusals[index]
    assert "refused" in refusal and HOSTILE[index][1] in refusal["refused"], refusal
    assert len(refusal["refused"]) < 1500 and "\n" not in refusal["refused"]


def test_a_hostile_configuration_reaches_the_user_as_one_json_line(tmp_path):
    (tmp_path / "bad.yaml").write_text(HOSTILE[0][0])  # the alias bomb under sources:
    result = run("crawl", "--config", "bad.yaml", "--day", "2026-11-25", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout and len(result.stderr) < 2000
    line = json.loads(result.stderr.strip().splitlines()[-1])
    assert line["error_class"] == "config_error" and "source entry" in line["message"], line
