"""Readiness with a bucket as the store (SeaweedFS): `store_writable` writes and deletes a
probe object; with a wrong secret it fails naming the bucket, and the secret is not in it."""
from __future__ import annotations

import yaml

from media_crawler.config import load_config
from media_crawler.observe.health import ready
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger


def bucket_config(s3_server, tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"store": s3_server.new_uri(), "ledger_url": f"sqlite:///{tmp_path / 'ledger.db'}",
                                    "sources": []}))
    return load_config(path)


def test_the_store_probe_writes_into_the_bucket_and_leaves_nothing(s3_server, tmp_path, monkeypatch):
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path / "home"))
    config = bucket_config(s3_server, tmp_path)
    try:
        result = ready(Ledger(config.ledger_url).engine, config)
        assert result.checks["store_writable"]["ok"], result.checks["store_writable"]
        assert result.checks["store_writable"]["detail"].startswith(config.store_url)
        assert s3_server.keys(config.store_url) == [], "the probe object is deleted"

        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-for-the-probe")
        result = ready(Ledger(config.ledger_url).engine, config)
        check = result.checks["store_writable"]
        assert not check["ok"] and config.store_url.split("/")[2] in check["detail"]
        assert "a-wrong-secret-for-the-probe" not in check["detail"] + result.reason
    finally:
        dispose_engines()
