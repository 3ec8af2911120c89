"""The platform contract: what one platform package declares, in one `PlatformSpec`.

Every platform package exports `SPEC = PlatformSpec(...)` from its `__init__.py`;
`platforms/registry.py` finds the built-in ones and third-party ones (the entry-point
group `media_crawler.platforms`), and everything that lists platforms (sources.yaml
parsing, the shard layout, rate budgets, `normalize`, the demo and the simulator)
asks the registry. A platform's part of the simulator is not named here: the
simulator package (media_crawler_sim) finds it under the platform's name in its own
entry-point group, so the product names nothing of the simulator. This module
imports nothing of the crawler but `models`, so config.py (settings), models.py
(sources) and the platform packages can all use it.

Heavy parts (the adapter, normalizers, hooks) are named as
`"package.module:attribute"` references and imported on first use, so listing the
platforms costs no more than importing their `__init__` modules.

A third-party package (e.g. `mc_instagram`) registers a platform with one entry point:

    [project.entry-points."media_crawler.platforms"]
    instagram = "mc_instagram:SPEC"
"""
from __future__ import annotations

import hashlib
import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from media_crawler.models import Source
from media_crawler.shown import shown

# What a registered platform that names no rate gets: never "unthrottled" silently.
CONSERVATIVE_RATE = (1.0, 2.0)
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,30}$")  # a source key is "<name>-<ident>": no '-' in a name

Ref = Any  # a callable/class/object, or "package.module:attribute" imported on first use


def resolve(ref: Ref) -> Any:
    """The object a reference names (a non-string is its own object)."""
    if not isinstance(ref, str):
        return ref
    module_name, _, attribute = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in filter(None, attribute.split(".")):
        target = getattr(target, part)
    return target


@dataclass(frozen=True)
class PlatformSettings:
    """Per-platform settings from sources.yaml (`platforms:` section).

    api_base: the platform's API root (simulator, proxy or mirror in tests);
    extra_api_bases: further roots a platform needs (Weibo's m. and ajax APIs);
    media_hosts: host patterns media may be fetched from (`*.hdslb.com`);
    credentials are names of environment variables, never values;
    options: rate, burst, max_pages, allow_unknown_formats and the keys the
    platform's own spec declares (`PlatformSpec.settings`: a video quality
    limit, a codec order, muxing), parsed; read those with `PlatformSpec.setting`.
    """

    api_base: str | None = None
    extra_api_bases: Mapping[str, str] = field(default_factory=dict)
    media_hosts: tuple[str, ...] = ()
    credential_env: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)


# Types a platform's own setting may have (config.py checks them, with the key's name).
SETTING_TYPES = ("int", "number", "bool", "text", "names")


@dataclass(frozen=True)
class Setting:
    """One `platforms.<name>.<key>` a platform adds to the shared keys.

    type: int (whole number >= minimum), number (positive), bool, text, names (a list
    of strings). The parsed value lands in `PlatformSettings.options[name]`; an absent
    key gets `default` (when not None)."""

    name: str
    type: str
    default: Any = None
    minimum: int = 0
    doc: str = ""

    def __post_init__(self) -> None:
        if self.type not in SETTING_TYPES:
            raise ValueError(f"setting {self.name!r}: type must be one of {', '.join(SETTING_TYPES)}")


@dataclass(frozen=True)
class PlatformSpec:
    """Everything the crawler needs to know of one platform.

    - name: the sources.yaml key (`bilibili: user 12345`), [a-z][a-z0-9_]*.
    - adapter: the PlatformAdapter class (platforms/base.py).
    - source_kinds / default_kind: `user 12345` or a bare `12345` (the default kind);
      an entry of another kind is refused. `whole_ident`: the entry is the ident
      whatever it holds (a URL), of kind `default_kind`.
    - hashed_key: the source key is `<name>-<sha256 of ident, 10 hex>` instead of
      `<name>-<ident's [A-Za-z0-9]>` (idents such as URLs).
    - rate / burst: the default request budget (requests/s); None: CONSERVATIVE_RATE.
      unlimited=True: no budget unless sources.yaml sets `rate` (plain URL lists).
    - media_hosts: host patterns its media may come from ("*": any public host).
    - settings: its own `platforms.<name>` keys, beside the shared ones (config.py);
      any other key is refused.
    - source_options: the keys a source entry may carry beside its platform's, each with
      its allowed values (`- weibo: user 1` + `api: ajax`); any other key or value is refused.
    - credential: (credential_env key, default environment variable) its adapter reads.
    - signature_params: query parameters that sign its media URLs beyond the generic ones
      (scrub.py SIGNATURE_PARAM_NAMES): not identity, dropped from every logged URL.
    - normalize: fn(body, settings, now, note, context) -> records: what
      `media-crawler normalize` does with a saved answer (detects its shape);
      normalize_context: fn(bodies) -> dict, what answers given together tell
      about each other (Bilibili's parts by cid).
    - classify: fn(body) -> CrawlError | None: the error a decoded API answer
      stands for (None: not an error answer). The tables stay in its errors.py.
    - on_response: fn(budget, platform, response) after every API answer (Facebook's
      usage headers slow its shared budget before it starts refusing).
    - plain_api: its API answers are public documents fetched with plain GETs (a URL
      list's feed pages): no cookie jar carried between calls, no netrc credentials.
      They go over the media path's urllib3 pools (platforms/plain_transport.py), not
      requests, so a run of such platforms alone never imports requests.
    """

    name: str
    adapter: Ref
    source_kinds: tuple[str, ...] = ("user",)
    default_kind: str = "user"
    whole_ident: bool = False
    hashed_key: bool = False
    rate: float | None = None
    burst: float | None = None
    unlimited: bool = False
    media_hosts: tuple[str, ...] = ()
    settings: tuple[Setting, ...] = ()
    source_options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    credential: tuple[str, str] | None = None
    signature_params: tuple[str, ...] = ()
    normalize: Ref = None
    normalize_context: Ref = None
    classify: Ref = None
    on_response: Ref = None
    plain_api: bool = False

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"platform name {self.name!r} must match {NAME_PATTERN.pattern}")
        if self.default_kind not in self.source_kinds:
            raise ValueError(f"platform {self.name}: default_kind {self.default_kind!r} is not in source_kinds")

    # -- sources ------------------------------------------------------------------

    def parse_source(self, text: Any, options: Mapping[str, Any] | None = None) -> Source:
        """A sources.yaml entry's value (`user 12345`, `12345`, a feed URL) as a Source."""
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            raise ValueError(f"cannot read source {self.name}: {shown(text)}; expected e.g. '{self.default_kind} 12345'")
        text = str(text).strip()
        options = self._source_options(text, options or {})
        if self.whole_ident:
            return Source(self.name, self.default_kind, text, options, key=self.source_key(text))
        parts = text.split()
        if len(parts) == 1:
            kind, ident = self.default_kind, parts[0]
        elif len(parts) == 2:
            kind, ident = parts[0].lower(), parts[1]
        else:
            raise ValueError(f"cannot read source {self.name}: {shown(text)}; expected e.g. '{self.default_kind} 12345'")
        if kind not in self.source_kinds:
            raise ValueError(f"cannot read source {self.name}: {shown(text)}; the kind must be one of "
                             f"{', '.join(self.source_kinds)}")
        return Source(self.name, kind, ident, options, key=self.source_key(ident))

    def _source_options(self, text: str, options: Mapping[str, Any]) -> dict[str, str]:
        """An entry's options, each a key this platform declares with one of its values
        (lower-cased): a typo such as `apii: ajax` must not be ignored without a word."""
        if not options:
            return {}
        allowed = dict(self.source_options)
        parsed = {}
        for key, value in options.items():
            if key not in allowed:
                known = f"known: {', '.join(allowed)}" if allowed else "it takes none"
                raise ValueError(f"source {self.name}: {shown(text)}: unknown option {shown(key)} ({known})")
            if not isinstance(value, str) or value.strip().lower() not in allowed[key]:
                raise ValueError(f"source {self.name}: {shown(text)}: {key} must be one of "
                                 f"{', '.join(allowed[key])}, not {shown(value)}")
            parsed[key] = value.strip().lower()
        return parsed

    def source_key(self, ident: str) -> str:
        """A source's key: short, stable, only [a-z0-9-]."""
        if self.hashed_key:
            return f"{self.name}-" + hashlib.sha256(ident.encode()).hexdigest()[:10]
        return f"{self.name}-{re.sub(r'[^A-Za-z0-9]', '', ident)}"

    # -- its own settings ----------------------------------------------------------------

    def setting(self, settings: PlatformSettings, name: str) -> Any:
        """One of the keys it declares (`settings`): as sources.yaml set it, else its default."""
        for own in self.settings:
            if own.name == name:
                return settings.options.get(name, own.default)
        raise KeyError(f"platform {self.name} declares no setting {name!r}")

    # -- budgets --------------------------------------------------------------------

    def default_rate(self) -> tuple[float, float] | None:
        """(requests/s, burst) by default; None only for an explicitly unlimited platform."""
        if self.unlimited:
            return None
        if self.rate is None:
            return CONSERVATIVE_RATE
        return (float(self.rate), float(self.burst if self.burst is not None else self.rate))

    # -- the lazily imported parts -------------------------------------------------------

    def load(self, part: str) -> Any:
        """The object of a reference field (`adapter`, `normalize`, `classify`, ...), or None."""
        ref = getattr(self, part)
        return None if ref is None else resolve(ref)
