"""`media-crawler health --live/--ready`: exit codes and the one-line JSON reason for each failing check."""
import json

import pytest
import yaml

from media_crawler.cli import main


def probe(capsys, *args) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["health", *args])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line, for an orchestrator's event log
    return code, json.loads(out)


def healthy_config(tmp_path, **overrides):
    data = {"store": str(tmp_path / "store"), "ledger_url": f"sqlite:///{tmp_path / 'ledger.db'}",
            "sources": [], **overrides}
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_fresh_home_is_live_and_ready(tmp_path, capsys):
    path = healthy_config(tmp_path)
    code, answer = probe(capsys, "--live", "--config", str(path))
    assert code == 0 and answer["ok"] and answer["probe"] == "live" and "answered" in answer["reason"]
    code, answer = probe(capsys, "--ready", "--config", str(path))
    assert code == 0 and answer["ok"], answer
    assert set(answer["checks"]) == {"database_writable", "store_writable", "disk_free", "platform_auth",
                                     "credentials", "platform_outage"}
    assert answer["checks"]["platform_outage"]["platforms"] == {}
    assert not list((tmp_path / "store" / "staging").iterdir()), "the store probe leaves nothing behind"


def test_not_ready_while_a_platform_is_in_auth_failure(faulty_crawl, capsys):
    code, answer = probe(capsys, "--ready", "--config", str(faulty_crawl.config_path))
    assert code == 1 and not answer["ok"]
    assert "auth" in answer["reason"] and "facebook" in answer["reason"]
    assert answer["checks"]["database_writable"]["ok"] and answer["checks"]["store_writable"]["ok"]
    code, answer = probe(capsys, "--live", "--config", str(faulty_crawl.config_path))
    assert code == 0


def test_not_ready_when_disk_is_below_the_minimum(tmp_path, capsys):
    path = healthy_config(tmp_path, min_free_bytes=10**18)
    code, answer = probe(capsys, "--ready", "--config", str(path))
    assert code == 1 and "disk below min_free_bytes" in answer["reason"]
    assert not answer["checks"]["disk_free"]["ok"] and answer["checks"]["store_writable"]["ok"]


def test_not_ready_when_the_store_cannot_be_written(tmp_path, capsys):
    (tmp_path / "store").write_text("a file where the store folder should be")
    code, answer = probe(capsys, "--ready", "--config", str(healthy_config(tmp_path)))
    assert code == 1 and "store not writable" in answer["reason"]


def test_not_live_when_the_database_does_not_answer_and_no_password_leaks(tmp_path, capsys):
    path = healthy_config(tmp_path, ledger_url="postgresql+psycopg2://crawler:hunter2-secret@127.0.0.1:9/ledger")
    code, answer = probe(capsys, "--live", "--config", str(path))
    assert code == 1 and not answer["ok"] and "did not answer" in answer["reason"]
    assert "hunter2-secret" not in json.dumps(answer)
    code, answer = probe(capsys, "--ready", "--config", str(path))
    assert code == 1 and "hunter2-secret" not in json.dumps(answer)


def test_a_probe_is_required():
    with pytest.raises(SystemExit):
        main(["health"])
