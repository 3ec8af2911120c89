"""sources.yaml: what to crawl, where the store and ledger live, per-platform settings.

```yaml
store: ./var/store                 # blob store root (default $MEDIA_CRAWLER_HOME/store)
ledger_url: sqlite:///var/ledger.db  # or postgresql+psycopg2://... (env MEDIA_CRAWLER_LEDGER_URL wins)
allow_hosts: ["127.0.0.1:8787"]    # extra media/API hosts for every platform; an internal one only on its port
platforms:
  bilibili: {api_base: "http://127.0.0.1:8787/bilibili", max_height: 1080, mux: true}  # mux: DASH tracks into one MP4 too (needs ffmpeg)
  facebook: {api_base: "...", credential_env: {access_token: FB_ACCESS_TOKEN}}
sources:
  - bilibili: user 12345
  - weibo: user 679
    api: ajax
  - urls: http://127.0.0.1:8787/urls/demo.json
```
Secrets never appear here: `credential_env` names environment variables.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping


from media_crawler.models import PLATFORMS, Source
from media_crawler.platforms.base import PlatformSettings

CONFIG_ENV = "MEDIA_CRAWLER_CONFIG"
HOME_ENV = "MEDIA_CRAWLER_HOME"
LEDGER_ENV = "MEDIA_CRAWLER_LEDGER_URL"


class ConfigError(ValueError):
    """sources.yaml is missing, unreadable or says something we cannot do."""


@dataclass(frozen=True)
class CrawlConfig:
    sources: tuple[Source, ...]
    platforms: Mapping[str, PlatformSettings]
    store_root: Path
    ledger_url: str
    allow_hosts: tuple[str, ...] = ()
    workers: int = 1
    max_item_bytes: int = 2 * 1024**3
    min_free_bytes: int = 512 * 1024**2
    path: Path | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def settings_for(self, platform: str) -> PlatformSettings:
        return self.platforms.get(platform, PlatformSettings())

    def source_by_key(self, key: str) -> Source:
        for source in self.sources:
            if source.key == key:
                return source
        raise ConfigError(f"source {key!r} is not in {self.path or 'the configuration'}")


def home_dir() -> Path:
    return Path(os.environ.get(HOME_ENV, "var")).resolve()


def default_config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV, "sources.yaml"))


def load_config(path: str | os.PathLike | None = None) -> CrawlConfig:
    import yaml  # here, not at the top: `fetch-urls` builds its config without a file

    path = Path(path) if path else default_config_path()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"no sources file at {path} (set {CONFIG_ENV} or pass --config)") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    return config_from_dict(raw, path=path)


def config_from_dict(raw: Mapping[str, Any], path: Path | None = None) -> CrawlConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError("the sources file must be a mapping with a 'sources' list")
    base = path.parent.resolve() if path else Path.cwd()
    home = home_dir()
    store_root = _resolve(raw.get("store"), base) or home / "store"
    ledger_url = os.environ.get(LEDGER_ENV) or raw.get("ledger_url") or f"sqlite:///{home / 'ledger.db'}"
    return CrawlConfig(
        sources=tuple(_parse_sources(raw.get("sources") or [])),
        platforms={name: _platform_settings(name, raw.get("platforms", {}).get(name) or {}) for name in PLATFORMS},
        store_root=store_root,
        ledger_url=ledger_url,
        allow_hosts=_host_entries("allow_hosts", raw.get("allow_hosts")),
        workers=int(raw.get("workers", 1)),
        max_item_bytes=int(raw.get("max_item_bytes", 2 * 1024**3)),
        min_free_bytes=int(raw.get("min_free_bytes", 512 * 1024**2)),
        path=path,
        raw=dict(raw),
    )


def _resolve(value: Any, base: Path) -> Path | None:
    if not value:
        return None
    candidate = Path(os.path.expandvars(str(value))).expanduser()
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


def _parse_sources(entries: Any) -> list[Source]:
    if not isinstance(entries, list):
        raise ConfigError("'sources' must be a list such as '- bilibili: user 12345'")
    sources = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ConfigError(f"cannot read source entry {entry!r}")
        platform_keys = [key for key in entry if key in PLATFORMS]
        if len(platform_keys) != 1:
            raise ConfigError(f"source entry {dict(entry)!r} must name exactly one of {', '.join(PLATFORMS)}")
        platform = platform_keys[0]
        options = {key: value for key, value in entry.items() if key != platform}
        try:
            sources.append(Source.parse(platform, entry[platform], options))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    keys = [source.key for source in sources]
    duplicates = {key for key in keys if keys.count(key) > 1}
    if duplicates:
        raise ConfigError(f"sources listed twice: {', '.join(sorted(duplicates))}")
    return sources


def _host_entries(where: str, value: Any) -> tuple[str, ...]:
    """Host entries of the URL policy (net/policy.py), refused here when unreadable."""
    from media_crawler.errors import CrawlError
    from media_crawler.net.policy import UrlPolicy

    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        raise ConfigError(f"{where} must be a list of host names such as 'cdn.example.org' or '127.0.0.1:8787'")
    try:
        UrlPolicy.from_entries(value)
    except CrawlError as error:
        raise ConfigError(f"{where}: {error.message}") from None
    return tuple(value)


def _flag(platform: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"platforms.{platform}.{key} must be true or false, not {value!r}")
    return value


def _platform_settings(name: str, raw: Mapping[str, Any]) -> PlatformSettings:
    known = {"api_base", "extra_api_bases", "media_hosts", "max_height", "codec_order", "credential_env", "mux"}
    return PlatformSettings(
        api_base=raw.get("api_base"),
        extra_api_bases=dict(raw.get("extra_api_bases") or {}),
        media_hosts=_host_entries(f"platforms.{name}.media_hosts", raw.get("media_hosts")),
        max_height=int(raw.get("max_height", 1080)),
        codec_order=tuple(raw.get("codec_order") or ("avc", "hevc", "av1")),
        credential_env=dict(raw.get("credential_env") or {}),
        mux=_flag(name, "mux", raw.get("mux", True)),
        options={key: value for key, value in raw.items() if key not in known},
    )
