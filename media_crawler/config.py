"""sources.yaml: what to crawl, where the store and ledger live, per-platform settings.

```yaml
store: ./var/store                 # blob store root (default $MEDIA_CRAWLER_HOME/store)
ledger_url: sqlite:///var/ledger.db  # or postgresql+psycopg2://... (env MEDIA_CRAWLER_LEDGER_URL wins)
allow_hosts: ["127.0.0.1:8787"]    # extra media/API hosts for every platform; an internal one only on its port
keep_api_answers: true             # keep every API answer as fetched, for `export --format wacz` (default true)
rehash_commits: false              # an s3:// store: the blocking check re-downloads this run's commits (default: HEAD)
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
from collections.abc import Mapping  # not typing's: its isinstance costs 10 us, once per source
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Sequence

from media_crawler.environment import CONFIG_ENV, default_config_path, environment_value, home_dir, ledger_url_override
from media_crawler.models import Source
from media_crawler.platform_spec import PlatformSettings, PlatformSpec, Setting
from media_crawler.shards import PartitionLayout, layout_from_raw
from media_crawler.shown import shown, shown_some


def _specs() -> Mapping[str, PlatformSpec]:
    """The registered platforms (platforms/registry.py: built-in and entry points)."""
    from media_crawler.platforms.registry import specs

    return specs()


class ConfigError(ValueError):
    """sources.yaml is missing, unreadable or says something we cannot do."""


@dataclass(frozen=True)
class CrawlConfig:
    """sources.yaml (or fetch-urls' arguments), checked: every field parsed and validated."""

    sources: tuple[Source, ...]
    platforms: Mapping[str, PlatformSettings]
    store_root: Path
    ledger_url: str
    allow_hosts: tuple[str, ...] = ()
    workers: int = 1
    max_item_bytes: int = 2 * 1024**3
    min_free_bytes: int = 512 * 1024**2
    keep_api_answers: bool = True
    # The commit's blocking check on a store whose server verified each upload's sha256
    # (s3://): False trusts that record (one HEAD a blob), True re-downloads and re-hashes
    # this run's commits as a folder store's check always does (pipeline/integrity.py).
    rehash_commits: bool = False
    path: Path | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    layout: PartitionLayout = field(default_factory=PartitionLayout)
    # `store: s3://BUCKET/PREFIX`: the blobs live there; store_root is then the local
    # folder staged downloads are written to before their upload.
    store_url: str | None = None

    @property
    def store_location(self) -> "str | Path":
        """What open_blob_store opens: the bucket URI, else the store folder."""
        return self.store_url or self.store_root

    def settings_for(self, platform: str) -> PlatformSettings:
        return self.platforms.get(platform, PlatformSettings())

    def source_by_key(self, key: str) -> Source:
        for source in self.sources:
            if source.key == key:
                return source
        raise ConfigError(f"source {key!r} is not in {self.path or 'the configuration'}")

    def sources_in(self, shard: str) -> list[Source]:
        """The configured sources a shard partition holds (shards.py)."""
        return list(self._sources_by_shard.get(shard, ()))

    def unset_credentials(self) -> dict[str, list[tuple[str, str]]]:
        """platform -> (credential_env key, variable) of every variable its `credential_env`
        names that is unset or empty now: naming one says the platform needs it."""
        unset = {platform: [(key, env) for key, env in sorted(settings.credential_env.items())
                            if environment_value(str(env)) is None]
                 for platform, settings in self.platforms.items()}
        return {platform: names for platform, names in unset.items() if names}

    @cached_property
    def _sources_by_shard(self) -> dict[str, list[Source]]:
        # Every step of a run asks for its shard: one pass over the sources per configuration, not per step.
        return self.layout.group(self.sources)


def load_config(path: str | os.PathLike | None = None) -> CrawlConfig:
    import yaml  # here, not at the top: `fetch-urls` builds its config without a file

    path = Path(path) if path else default_config_path()
    try:
        raw, sources = _parse_text(path, path.read_text(encoding="utf-8"), _specs_key())
    except FileNotFoundError:
        raise ConfigError(f"no sources file at {path} (set {CONFIG_ENV} or pass --config)") from None
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path} is not valid YAML: {_one_line(exc)}") from None
    except ValueError as exc:  # YAML that reads as a value Python refuses: 2026-02-30, a 5,000-digit number
        raise ConfigError(f"{path} holds a value that cannot be read: {_one_line(exc)}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return config_from_dict(raw, path=path, sources=sources)


def _one_line(exc: BaseException) -> str:
    from media_crawler.scrub import excerpt  # here: scrub imports config

    return excerpt(" ".join(str(exc).split()), 300)


@lru_cache(maxsize=2)
def _parse_text(path: Path, text: str, specs_key: tuple) -> tuple[Any, tuple[Source, ...] | None]:
    """The data of a sources file and its sources, parsed once per process for the same
    text: a run worker reads the file when it loads the code location and again for its
    resources, 0.5 s each with 12,800 sources. Keyed by the whole text, so an edited file
    is parsed again; the rest of the configuration (paths, environment) is built on every
    load. Across processes, config_cache's parsed copy spares the YAML. Sources that do
    not parse are left to config_from_dict, which names the error in its usual order.
    The result is shared: nothing may modify it."""
    from media_crawler.config_cache import load_yaml

    raw = load_yaml(path, text) or {}
    try:
        sources = tuple(_parse_sources(raw.get("sources") or [])) if isinstance(raw, Mapping) else None
    except ConfigError:
        sources = None
    return raw, sources


def _specs_key() -> tuple:
    return tuple((name, id(spec)) for name, spec in _specs().items())


# Every key sources.yaml may hold; anything else is refused with its name (a typo such as
# `ledger:` for `ledger_url:` must not be ignored without a word).
TOP_LEVEL_KEYS = frozenset({"sources", "platforms", "store", "ledger_url", "allow_hosts", "workers",
                            "max_item_bytes", "min_free_bytes", "partitions", "keep_api_answers",
                            "rehash_commits"})
# The keys every platform takes (`platforms.<name>`); a platform's spec adds its own
# (PlatformSpec.settings: a quality limit, a codec order, muxing), and any other key is
# refused, by name of the platforms that own it when some do.
PLATFORM_KEYS = frozenset({"api_base", "extra_api_bases", "media_hosts", "credential_env", "rate", "burst",
                           "max_pages", "allow_unknown_formats"})


def platform_keys(spec: PlatformSpec) -> frozenset[str]:
    """What `platforms.<spec.name>` may hold: the shared keys and the spec's own."""
    return PLATFORM_KEYS | {setting.name for setting in spec.settings}


def _refuse_unknown(where: str, raw: Mapping[str, Any], known: frozenset[str], path: Path | None) -> None:
    unknown = [key for key in raw if key not in known]
    if unknown:
        raise ConfigError(f"{path or 'the configuration'}: unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{shown_some(unknown)} in {where} (known: {', '.join(sorted(known))})")


def _bool(where: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, not {shown(value)}")
    return value


def _int(where: str, value: Any, default: int, minimum: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**63:
        raise ConfigError(f"{where} must be a whole number of at least {minimum}, not {shown(value)}")
    return value


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
        raise ConfigError(f"{where} must be a positive number, not {shown(value)}")
    return float(value)


def _text(where: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, not {shown(value)}")
    return value


def _mapping(where: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"{where} must map names to strings, not {shown(value)}")
    return dict(value)


def config_from_dict(raw: Mapping[str, Any], path: Path | None = None,
                     sources: tuple[Source, ...] | None = None) -> CrawlConfig:
    """`sources`: raw's sources, already parsed (load_config's cache). Every error names
    the file once, at its start, whichever check raised it."""
    try:
        return _config_from_dict(raw, path, sources)
    except ConfigError as exc:
        if path is None or str(exc).startswith(f"{path}:"):
            raise
        raise ConfigError(f"{path}: {exc}") from None


def _config_from_dict(raw: Mapping[str, Any], path: Path | None, sources: tuple[Source, ...] | None) -> CrawlConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError("the sources file must be a mapping with a 'sources' list")
    _refuse_unknown("the top level", raw, TOP_LEVEL_KEYS, path)
    platforms = raw.get("platforms") or {}
    if not isinstance(platforms, Mapping):
        raise ConfigError("'platforms' must map platform names to their settings")
    specs = _specs()
    unknown_platforms = [name for name in platforms if name not in specs]
    if unknown_platforms:
        raise ConfigError(f"{path or 'the configuration'}: unknown platform(s) {shown_some(unknown_platforms)} "
                          f"under 'platforms' (known: {', '.join(specs)})")
    base = path.parent.resolve() if path else Path.cwd()
    home = home_dir()
    store_url = _store_url(_text("store", raw.get("store")), path)
    store_root = (None if store_url else _resolve(_text("store", raw.get("store")), base)) or home / "store"
    ledger_url = ledger_url_override() or _text("ledger_url", raw.get("ledger_url")) or f"sqlite:///{home / 'ledger.db'}"
    return CrawlConfig(
        sources=sources if sources is not None else tuple(_parse_sources(raw.get("sources") or [])),
        platforms={name: _platform_settings(name, platforms.get(name) or {}, path, spec) for name, spec in specs.items()},
        store_root=store_root,
        store_url=store_url,
        ledger_url=ledger_url,
        allow_hosts=_host_entries("allow_hosts", raw.get("allow_hosts")),
        workers=_int("workers", raw.get("workers"), 1, minimum=1),
        max_item_bytes=_int("max_item_bytes", raw.get("max_item_bytes"), 2 * 1024**3, minimum=1),
        min_free_bytes=_int("min_free_bytes", raw.get("min_free_bytes"), 512 * 1024**2),
        keep_api_answers=_bool("keep_api_answers", raw.get("keep_api_answers"), True),
        rehash_commits=_bool("rehash_commits", raw.get("rehash_commits"), False),
        path=path,
        raw=dict(raw),
        layout=_layout(raw.get("partitions"), path),
    )


def _layout(raw: Any, path: Path | None) -> PartitionLayout:
    try:
        return layout_from_raw(raw)
    except ValueError as exc:
        raise ConfigError(f"{path or 'the configuration'}: {exc}") from None


def _store_url(value: str | None, path: Path | None) -> str | None:
    """`store: s3://BUCKET/PREFIX`, checked; None for a folder."""
    if not (value or "").startswith("s3://"):
        return None  # a folder: the S3 modules stay unimported
    from media_crawler.store.s3.settings import parse_uri

    try:
        return str(parse_uri(value))
    except ValueError as exc:
        raise ConfigError(f"{path or 'the configuration'}: store: {exc}") from None


def _resolve(value: Any, base: Path) -> Path | None:
    if not value:
        return None
    candidate = Path(os.path.expandvars(str(value))).expanduser()
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


def _parse_sources(entries: Any) -> list[Source]:
    if not isinstance(entries, list):
        raise ConfigError("'sources' must be a list such as '- bilibili: user 12345'")
    sources = []
    specs = _specs()
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ConfigError(f"cannot read source entry {shown(entry)}")
        named = [key for key in entry if key in specs]
        if len(named) != 1:
            raise ConfigError(f"source entry {shown(dict(entry))} must name exactly one of {', '.join(specs)}")
        platform = named[0]
        # Nearly every entry is `- bilibili: user 1`: no options to split off.
        options = {key: value for key, value in entry.items() if key != platform} if len(entry) > 1 else None
        try:
            sources.append(specs[platform].parse_source(entry[platform], options))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    seen: set[str] = set()
    repeated: set[str] = set()
    for source in sources:
        (repeated if source.key in seen else seen).add(source.key)
    if repeated:
        raise ConfigError(f"sources listed twice: {shown_some(repeated)}")
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
        raise ConfigError(f"platforms.{platform}.{key} must be true or false, not {shown(value)}")
    return value


def _platform_settings(
    name: str, raw: Mapping[str, Any], path: Path | None = None, spec: PlatformSpec | None = None
) -> PlatformSettings:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"platforms.{name} must be a mapping of settings")
    own = spec.settings if spec is not None else ()
    known = PLATFORM_KEYS | {setting.name for setting in own}
    _refuse_others_settings(name, raw, known, path)
    _refuse_unknown(f"platforms.{name}", raw, known, path)
    where = f"platforms.{name}"
    options = {key: value for key, value in raw.items() if key in ("rate", "burst", "max_pages", "allow_unknown_formats")}
    for setting in own:
        value = _own_setting(f"{where}.{setting.name}", setting, raw.get(setting.name))
        if value is not None:
            options[setting.name] = value
    for key in ("rate", "burst"):
        if key in options:
            options[key] = _number(f"{where}.{key}", options[key])
    if "max_pages" in options:
        options["max_pages"] = _int(f"{where}.max_pages", options["max_pages"], 0, minimum=1)
    if "allow_unknown_formats" in options:
        _flag(name, "allow_unknown_formats", options["allow_unknown_formats"])
    for base_name, base in (("api_base", raw.get("api_base")), *(
            (f"extra_api_bases.{k}", v) for k, v in _mapping(f"{where}.extra_api_bases", raw.get("extra_api_bases")).items())):
        if base is not None:
            _host_entries(f"{where}.{base_name}", [_text(f"{where}.{base_name}", base)])
    return PlatformSettings(
        api_base=_text(f"{where}.api_base", raw.get("api_base")),
        extra_api_bases=_mapping(f"{where}.extra_api_bases", raw.get("extra_api_bases")),
        media_hosts=_host_entries(f"{where}.media_hosts", raw.get("media_hosts")),
        credential_env=_mapping(f"{where}.credential_env", raw.get("credential_env")),
        options=options,
    )


def _refuse_others_settings(name: str, raw: Mapping[str, Any], known: frozenset[str], path: Path | None) -> None:
    """A key of other platforms' specs given to this one: which platforms own it, in one line."""
    for key in sorted(key for key in raw if isinstance(key, str) and key not in known):
        owners = [spec.name for spec in _specs().values() if any(setting.name == key for setting in spec.settings)]
        if owners:
            raise ConfigError(f"{path or 'the configuration'}: unknown key {shown(key)} in platforms.{name}: {key} is a "
                              f"setting of {' and '.join(owners)}, not of {name}")


def _own_setting(where: str, setting: Setting, value: Any) -> Any:
    """A key the platform's spec declares, checked against its type (platform_spec.Setting)."""
    if value is None:
        return setting.default
    if setting.type == "int":
        return _int(where, value, setting.default, minimum=setting.minimum)
    if setting.type == "number":
        return _number(where, value)
    if setting.type == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {shown(value)}")
        return value
    if setting.type == "text":
        return _text(where, value)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):  # names
        raise ConfigError(f"{where} must be a list of names such as [a, b], not {shown(value)}")
    return tuple(value)


def unset_credential_messages(config: CrawlConfig, platforms: Sequence[str] | None = None) -> list[str]:
    """One line per unset variable of `platforms` (default: those with a configured source):
    `FB_ACCESS_TOKEN is not set (platforms.facebook.credential_env.access_token)`."""
    wanted = set(platforms) if platforms is not None else {source.platform for source in config.sources}
    return [f"{env} is not set (platforms.{platform}.credential_env.{key})"
            for platform, names in sorted(config.unset_credentials().items()) if platform in wanted
            for key, env in names]
