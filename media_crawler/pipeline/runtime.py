"""Everything a stage needs, built once per process from the configuration."""
from __future__ import annotations

import functools
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from media_crawler.config import CrawlConfig
from media_crawler.platform_spec import PlatformSettings
from media_crawler.net.policy import UrlPolicy
from media_crawler.pipeline.scheduling import DOWNLOAD_THREADS_PER_WORKER
from media_crawler.scrub import register_environment_secrets
from media_crawler.platforms.base import PlatformAdapter
from media_crawler.store.blob_store import BlobStore
from media_crawler.store.open_store import open_blob_store

if TYPE_CHECKING:
    import requests

    from media_crawler.download.media_transport import MediaTransport
    from media_crawler.store.ledger import Ledger


def default_rates() -> dict[str, tuple[float, float]]:
    """Requests per second and burst per registered platform: its spec's rate, kept below
    the platform's published throttles, or platform_spec.CONSERVATIVE_RATE when it names
    none. Only a spec that says `unlimited=True` (plain URL lists: no platform to protect)
    has no budget unless `platforms.<name>.rate` is set."""
    from media_crawler.platforms.registry import specs

    return {name: rate for name, spec in specs().items() if (rate := spec.default_rate()) is not None}


def runtime_session() -> "requests.Session":
    """The HTTP session of one worker: a worker (one run, one partition at a time)
    downloads with a fixed number of threads, so its pool size does not depend on the
    configuration; `workers: N` adds run slots, not threads (deploy/workers.py)."""
    from media_crawler.sessions import make_session

    return make_session(pool_size=DOWNLOAD_THREADS_PER_WORKER * 2)


def open_ledger(url: str) -> "Ledger":
    from media_crawler.store.ledger import Ledger

    return Ledger(url)


class LedgerOpening(Future):
    """The ledger at `url`, imported (SQLAlchemy is most of a command's start-up), opened
    and migrated in a thread of its own ("ledger-open"), while the caller goes on with
    what needs no ledger row: its first feed request (fetch-urls).

    The thread starts at `start()`, or at the first wait for the ledger, whichever
    comes first. A runtime starts it as its first API request goes out (`Runtime.ledger`
    and `_before_api_request`): the opening is all interpreter work, and started earlier
    it would only take turns at the interpreter lock with the work that leads to that
    request; from there on it runs while the request waits for its answer.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> "LedgerOpening":
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._open, name="ledger-open", daemon=True)
                self._thread.start()
        return self

    def result(self, timeout: float | None = None) -> "Ledger":
        self.start()
        return super().result(timeout)

    def _open(self) -> None:
        try:
            self.set_result(open_ledger(self._url))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the ledger
            self.set_exception(exc)


@dataclass
class Runtime:
    """What the stages of one process share: configuration, ledger, store, HTTP, adapters and policies."""

    config: CrawlConfig
    # The ledger, or its opening (LedgerOpening, started or not): `ledger` waits for it.
    _ledger: "Ledger | Future[Ledger]"
    store: BlobStore
    # The HTTP of downloads and API calls (sessions.make_session), or the media transport
    # alone for a runtime whose platforms all have plain APIs (fetch-urls; `api_session`).
    session: "requests.Session | MediaTransport"
    download_threads: int = 8
    _adapters: dict[str, PlatformAdapter] = field(default_factory=dict)
    _policies: dict[tuple[str, str], UrlPolicy] = field(default_factory=dict)
    _unknown_formats: dict[str, bool] = field(default_factory=dict)  # allows_unknown_formats, per platform
    # The budget and the answer keeper are built at their first use, maybe in the feed
    # threads of discover_sources at once: one of them builds each.
    _build_lock: threading.Lock = field(default_factory=threading.Lock)
    _budget: object = None
    _answer_keeper: object = None
    _response_hooks: dict = field(default_factory=dict)  # platform -> its response hook or None

    @classmethod
    def from_config(cls, config: CrawlConfig, *, ledger: "Ledger | Future[Ledger] | None" = None,
                    session: "requests.Session | MediaTransport | None" = None) -> "Runtime":
        """Everything built from `config`; a `ledger` or `session` given is used as it is
        (defs/resources.py hands in the ones its resources own), a ledger may be one
        still to open or opening (LedgerOpening)."""
        # Adapters fall back to default variable names, so those are masked too.
        register_environment_secrets(
            env_name for settings in config.platforms.values() for env_name in settings.credential_env.values())
        return cls(
            config=config,
            _ledger=ledger if ledger is not None else open_ledger(config.ledger_url),
            store=open_blob_store(config.store_location, create=True, local_root=config.store_root),
            session=session if session is not None else runtime_session(),
            download_threads=DOWNLOAD_THREADS_PER_WORKER,
        )

    @property
    def ledger(self) -> "Ledger":
        """The ledger; one still opening is waited for here, at the first need of a row
        (and its failure to open is raised here, to each caller)."""
        if isinstance(self._ledger, Future):
            self._ledger = self._ledger.result()
        return self._ledger

    # The runtime is the CursorStore of its adapters' walks (platforms/base.py): a walk
    # reads or saves a cursor after its first page, so its first request needs no ledger.
    def get_cursor(self, source_key: str, name: str) -> str | None:
        return self.ledger.get_cursor(source_key, name)

    def set_cursor(self, source_key: str, name: str, value: str) -> None:
        self.ledger.set_cursor(source_key, name, value)

    def close(self) -> None:
        """Release what the runtime holds open (the HTTP connection pools)."""
        try:
            self.session.close()
        finally:
            api_session = self.__dict__.get("api_session")
            if api_session is not None and api_session is not self.session:
                api_session.close()

    @property
    def budget(self):
        with self._build_lock:
            if self._budget is None:
                from media_crawler.download.ratebudget import SharedRateBudget

                self._budget = SharedRateBudget(self.ledger.engine, self._rates)
            return self._budget

    def budget_for(self, platform: str):
        """The platform's shared request budget, or None for a platform without one (a plain
        URL list, unless `platforms.<name>.rate` gives it one): its requests wait for nothing,
        and no budget is built for it, nor the budget rows of platforms the run never asks."""
        return self.budget if platform in self._rates else None

    @functools.cached_property
    def transport(self):
        """The platforms' API transport (requests: platforms/transport.py)."""
        from media_crawler.platforms.transport import RequestsTransport

        return RequestsTransport(session=self.api_session, **self._transport_hooks())

    @functools.cached_property
    def plain_transport(self):
        """The API transport of a platform whose spec says `plain_api` (a URL list's feed):
        urllib3 over the media path's pools (platforms/plain_transport.py), no requests."""
        from media_crawler.download.media_transport import media_transport_of
        from media_crawler.platforms.plain_transport import PlainTransport

        return PlainTransport(media_transport_of(self.session), **self._transport_hooks())

    def _transport_hooks(self) -> dict:
        return {"policy_for": self.api_policy, "before_request": self._before_api_request,
                "after_response": self._heed_usage_headers,
                "keep_answer": self._keep_answer if self.config.keep_api_answers else None}

    @functools.cached_property
    def api_session(self) -> "requests.Session":
        """The requests Session of the platforms' APIs: the runtime's session, or, when the
        runtime was made with the media transport alone (fetch-urls: its feed goes over
        `plain_transport`), one made at its first need, carrying that same transport."""
        from media_crawler.download.media_transport import MediaTransport

        if not isinstance(self.session, MediaTransport):
            return self.session
        from media_crawler.sessions import make_session

        return make_session(media=self.session)

    @functools.cached_property
    def _rates(self) -> dict[str, tuple[float, float]]:
        """Requests per second and burst of each platform that has a budget."""
        rates = default_rates()
        for name, settings in self.config.platforms.items():
            if "rate" in settings.options:
                rates[name] = (float(settings.options["rate"]), float(settings.options.get("burst", settings.options["rate"])))
        return rates

    def _before_api_request(self, platform: str) -> None:
        """Before each API request: a ledger still to open starts opening (LedgerOpening:
        it runs while the request waits for its answer), then the platform's budget."""
        if isinstance(self._ledger, LedgerOpening):
            self._ledger.start()
        self._take_budget(platform)

    def _take_budget(self, platform: str) -> None:
        """A platform without a budget (a plain URL list) waits for nothing, not even
        the ledger that holds the budgets' buckets."""
        budget = self.budget_for(platform)
        if budget is not None:
            budget.acquire(platform)

    def _keep_answer(self, answer) -> None:
        self.answer_keeper.keep(answer)  # the keeper (and the ledger) wanted once an answer is in

    @property
    def answer_keeper(self):
        """Where each API answer is kept as fetched (pipeline/answers.py), unless
        `keep_api_answers: false` says not to (None). Built at the first answer."""
        if not self.config.keep_api_answers:
            return None
        with self._build_lock:
            if self._answer_keeper is None:
                from media_crawler.pipeline.answers import AnswerKeeper
                from media_crawler.store.open_store import open_answer_store

                store = open_answer_store(self.config.store_location, create=True, local_root=self.config.store_root)
                self._answer_keeper = AnswerKeeper(self.ledger, store)
            return self._answer_keeper

    def _response_hook(self, platform: str):
        """The platform's response hook (`PlatformSpec.on_response`) or None, loaded at its
        first answer: a run imports the hooks of the platforms it asks, not every one's."""
        try:
            return self._response_hooks[platform]
        except KeyError:
            from media_crawler.platforms.registry import spec_for

            spec = spec_for(platform)
            hook = spec.load("on_response") if spec.on_response is not None else None
            self._response_hooks[platform] = hook  # the same hook, whichever thread loads it
            return hook

    def _heed_usage_headers(self, platform: str, response) -> None:
        """The platform's response hook (`PlatformSpec.on_response`), after every API answer:
        Facebook reports how close we are to its limits, and slows the shared budget
        before it starts refusing, not after."""
        hook = self._response_hook(platform)
        if hook is not None:
            hook(self.budget, platform, response)

    def adapter(self, platform: str) -> PlatformAdapter:
        adapter = self._adapters.get(platform)
        if adapter is None:
            from media_crawler.platforms.registry import build_adapter, spec_for

            transport = self.plain_transport if spec_for(platform).plain_api else self.transport
            adapter = self._adapters[platform] = build_adapter(platform, self.config.settings_for(platform), transport)
        return adapter

    def allows_unknown_formats(self, platform: str) -> bool:
        """`platforms.<name>.allow_unknown_formats: true`: store bytes of no known media
        format (never documents or executables) as octet-stream instead of refusing them.
        Read once per platform (asked at every verify; settings_for builds a default
        PlatformSettings for a platform the configuration does not name)."""
        allowed = self._unknown_formats.get(platform)
        if allowed is None:
            allowed = self._unknown_formats[platform] = \
                self.config.settings_for(platform).options.get("allow_unknown_formats") is True
        return allowed

    def media_policy(self, platform: str, source_ident: str | None = None) -> UrlPolicy:
        """Where media for this platform may be fetched from (checked on every redirect hop):
        its spec's CDN patterns, `media_hosts` and `allow_hosts` (a plain URL list's
        spec names any public host). Worked out once per platform: the configuration never changes
        under a runtime. (`source_ident` is kept for callers; no policy depends on it.)"""
        policy = self._policies.get(("media", platform))
        if policy is None:
            from media_crawler.platforms.registry import spec_for

            # The spec's hosts ("*": any public host, as a plain URL list's spec says).
            settings = self.config.settings_for(platform)
            entries = [*spec_for(platform).media_hosts, *settings.media_hosts, *self.config.allow_hosts]
            # Media on the platform's own API origin (a simulator, a NAS) is the operator's server:
            # unlisted, it is host_not_allowed (fix the settings), not a hostile internal address.
            policy = self._policies[("media", platform)] = UrlPolicy.from_settings(
                entries, settings=f"platforms.{platform}.media_hosts or allow_hosts",
                named_elsewhere=_api_bases(settings))
        return policy

    def api_policy(self, platform: str) -> UrlPolicy:
        """Where API calls and feed pages (a URL feed's `next` links included) may go:
        any public host, the origins of `api_base` and `extra_api_bases` (operator
        configuration, so a simulator on 127.0.0.1 may be named there), and `allow_hosts`."""
        policy = self._policies.get(("api", platform))
        if policy is None:
            settings = self.config.settings_for(platform)
            entries = ["*", *_api_bases(settings), *self.config.allow_hosts]
            policy = self._policies[("api", platform)] = UrlPolicy.from_settings(
                entries, settings=f"allow_hosts or platforms.{platform}.api_base")
        return policy


def _api_bases(settings: PlatformSettings) -> list[str]:
    """The API origins a platform's settings name (`api_base`, `extra_api_bases`)."""
    return [base for base in (settings.api_base, *settings.extra_api_bases.values()) if base]
