"""Back up a crawl while it runs: Dagster's storage, the ledger, then the store.

The order is what makes a live backup restorable. Each database is copied as
one consistent snapshot, and each later copy is newer than the earlier one:

1. Dagster's storage first: its runs are then no newer than the ledger, so a
   run it shows as finished really finished before the ledger snapshot.
2. The ledger next: every row it says is committed had its blob linked into
   the store before that (commit links first, then updates the row), and
3. the store last: blobs are never removed, so every blob a committed row
   names is copied. Blobs committed after the ledger snapshot come along as
   orphans, which restore keeps and the resumed crawl adopts.

Leases held at backup time are recorded in the manifest; they are uncertain
by nature (the holder kept working after the snapshot) and restore treats them
so. Staging .part files are not backed up: a restore re-downloads those items.

The manifest also says what is needed to use the backup (format 2):
the ledger's schema version (read from the snapshot itself), the
media-crawler and Dagster versions that wrote it (restore refuses a backup
newer than the code that would read it), and the environment variables the
crawl reads its credentials from: the ones sources.yaml names
(`credential_env`) and the adapters' defaults, each with whether a
configured source's platform reads it and whether it was set where the
backup ran. Names and presence only, never a value.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from media_crawler.config import CrawlConfig
from media_crawler.environment import environment_value
from media_crawler.recovery.copying import BlobCopy, copy_blobs, copy_tree_of_sqlite, pg_dump, sqlite_copy
from media_crawler.store.blob_store import BlobStore
from media_crawler.store.open_store import open_answer_store, open_blob_store
from media_crawler.store.snapshots import leases_held_in, schema_version_in
from media_crawler.store.urls import is_postgres, same_postgres_database, sqlite_file

MANIFEST = "manifest.json"
LEDGER_SQLITE, LEDGER_PGDUMP = "ledger.db", "ledger.pgdump"
DAGSTER_DIR, DAGSTER_PGDUMP = "dagster_home", "dagster.pgdump"
STORE_DIR, CONFIG_COPY = "store", "sources.yaml"
FORMAT = 2  # 2: versions and credential names
PROJECT = "media-crawler"


def adapter_credentials() -> dict[str, tuple[str, str]]:
    """The credential each adapter reads: platform -> (credential_env key, default variable),
    from its spec's `credential` (platform_spec.py), as platforms/<p>/client.py call
    platforms/headers.py `credential(settings, key, default)` (the built-in defaults are
    scrub.DEFAULT_CREDENTIAL_ENVS; a test keeps the two in step)."""
    from media_crawler.platforms.registry import specs

    return {name: spec.credential for name, spec in specs().items() if spec.credential is not None}


@dataclass
class BackupManifest:
    format: int = FORMAT
    started_at: float = 0.0
    finished_at: float = 0.0
    ledger: str = ""  # "sqlite" | "postgres"
    dagster: str = ""  # "sqlite" | "postgres" | "shared-with-ledger" | "none"
    dagster_files: list[str] = field(default_factory=list)
    blobs: dict = field(default_factory=dict)
    leases_held: int = 0  # rows leased at snapshot time: uncertain, restore re-checks them
    config: str | None = None
    # Format 2: what is needed to read the backup, and to run the restored crawl.
    ledger_schema_version: int | None = None  # mc_schema_version of the snapshot (None: format 1)
    media_crawler_version: str | None = None
    dagster_version: str | None = None
    credentials: list[dict] = field(default_factory=list)  # credential_records(): names, never values

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, folder: Path) -> "BackupManifest":
        """The manifest; fields a newer format added are kept out (restore checks `format` first)."""
        path = folder / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{folder} is not a media-crawler backup (no {MANIFEST})")
        raw = json.loads(path.read_text())
        known = {item.name for item in fields(cls)}
        return cls(**{name: value for name, value in raw.items() if name in known})


def installed_version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def credential_records(config: CrawlConfig, environ=None) -> list[dict]:
    """Every variable the crawl may read a credential from, by name.

    `needed`: a configured source's platform reads it; `named_in_config`:
    sources.yaml names it (`credential_env`); `set_when_backed_up`: it held a
    value where this ran (presence only). Restore requires the needed ones that
    sources.yaml names or that were set: a default variable that was unset
    (bilibili without SESSDATA) was not used by the crawl that was backed up.
    """
    used = {source.platform for source in config.sources}
    records: dict[str, dict] = {}

    def note(env: str, platform: str, named: bool) -> None:
        record = records.setdefault(env, {"env": env, "platforms": [], "needed": False, "named_in_config": False,
                                          "set_when_backed_up": bool(environ.get(env) if environ is not None
                                                                                else environment_value(env))})
        if platform not in record["platforms"]:
            record["platforms"].append(platform)
        record["needed"] = record["needed"] or platform in used
        record["named_in_config"] = record["named_in_config"] or named

    credentials = adapter_credentials()
    for platform, settings in sorted(config.platforms.items()):
        for _key, env in sorted(settings.credential_env.items()):
            note(env, platform, named=True)
        if platform in credentials:
            key, default = credentials[platform]
            if key not in settings.credential_env:
                note(default, platform, named=False)
    return [records[name] for name in sorted(records)]


def required_credentials(records: list[dict]) -> list[str]:
    """The names a restored crawl needs before dispatch may resume (see credential_records)."""
    return [record["env"] for record in records
            if record.get("needed") and (record.get("named_in_config") or record.get("set_when_backed_up"))]


def dagster_postgres_url(dagster_home: Path) -> str | None:
    """The PostgreSQL URL of the instance's run storage, when it is on PostgreSQL."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(dagster_home)) as instance:
        return getattr(instance.run_storage, "postgres_url", None)


def backup(config: CrawlConfig, dagster_home: Path | None, dest: Path | str) -> BackupManifest:
    """Back up into `dest`, a folder (created) or s3://BUCKET/PREFIX (recovery/bucket.py); an
    earlier backup there is refreshed, blobs incrementally."""
    from media_crawler.store.open_store import is_object_store

    if is_object_store(dest):
        return _backup_to_bucket(config, dagster_home, str(dest))
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    manifest = _new_manifest(config)
    _snapshot_databases(config, dagster_home, dest, manifest)
    _copy_stores(config, open_blob_store(dest / STORE_DIR, create=True),
                 open_answer_store(dest / STORE_DIR, create=True), manifest)
    _copy_config(config, dest, manifest)
    manifest.finished_at = time.time()
    manifest.write(dest)
    return manifest


def _backup_to_bucket(config: CrawlConfig, dagster_home: Path | None, uri: str) -> BackupManifest:
    """The same steps, the files snapshotted locally first and uploaded after the blobs
    (recovery/bucket.py says why that order)."""
    from media_crawler.recovery.bucket import BackupBucket, work_folder

    bucket = BackupBucket(uri)
    bucket.check("backup to")  # a missing bucket or bad keys: one line, before anything is copied
    work = work_folder(config.store_root, uri)
    try:
        manifest = _new_manifest(config)
        _snapshot_databases(config, dagster_home, work, manifest)
        _copy_stores(config, bucket.blob_store(STORE_DIR, work), bucket.answer_store(STORE_DIR, work), manifest)
        _copy_config(config, work, manifest)
        for name in backup_files(manifest):  # the ledger first: Dagster's storage is never newer
            bucket.put(work, name)
        manifest.finished_at = time.time()
        manifest.write(work)
        bucket.put(work, MANIFEST)  # last: the backup is complete
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


def backup_files(manifest: BackupManifest) -> list[str]:
    """The files of a backup besides the manifest and the store, the ledger's first."""
    ledger = [LEDGER_SQLITE] if manifest.ledger == "sqlite" else [LEDGER_PGDUMP]
    dagster = [f"{DAGSTER_DIR}/{name}" for name in manifest.dagster_files]
    if manifest.dagster == "postgres":
        dagster.append(DAGSTER_PGDUMP)
    return ledger + dagster + ([manifest.config] if manifest.config else [])


def _new_manifest(config: CrawlConfig) -> BackupManifest:
    import dagster

    return BackupManifest(started_at=time.time(), media_crawler_version=installed_version(PROJECT),
                          dagster_version=dagster.__version__, credentials=credential_records(config))


def _snapshot_databases(config: CrawlConfig, dagster_home: Path | None, dest: Path,
                        manifest: BackupManifest) -> None:
    """Steps 1 and 2 (the module docstring): Dagster's storage, then the ledger, into `dest`."""
    dagster_url = dagster_postgres_url(dagster_home) if dagster_home else None
    # 1. Dagster's storage.
    if dagster_home is None:
        manifest.dagster = "none"
    elif dagster_url is None:
        manifest.dagster = "sqlite"
        shutil.rmtree(dest / DAGSTER_DIR, ignore_errors=True)  # runs deleted since the last backup go too
        manifest.dagster_files = copy_tree_of_sqlite(dagster_home, dest / DAGSTER_DIR)
    else:
        manifest.dagster_files = _copy_instance_yaml(dagster_home, dest / DAGSTER_DIR)
        if same_postgres_database(dagster_url, config.ledger_url):
            manifest.dagster = "shared-with-ledger"  # the ledger's dump below holds Dagster's tables too
        else:
            manifest.dagster = "postgres"
            pg_dump(dagster_url, dest / DAGSTER_PGDUMP)
    # 2. The ledger.
    ledger_file = sqlite_file(config.ledger_url)
    if ledger_file is not None:
        manifest.ledger = "sqlite"
        sqlite_copy(ledger_file, dest / LEDGER_SQLITE)
        manifest.leases_held = leases_held_in(f"sqlite:///{dest / LEDGER_SQLITE}")
        manifest.ledger_schema_version = schema_version_in(f"sqlite:///{dest / LEDGER_SQLITE}")
    elif is_postgres(config.ledger_url):
        manifest.ledger = "postgres"
        pg_dump(config.ledger_url, dest / LEDGER_PGDUMP)
        manifest.leases_held = leases_held_in(config.ledger_url)  # approximately: read after the dump
        manifest.ledger_schema_version = schema_version_in(config.ledger_url)  # after the dump: never older than it
    else:
        raise ValueError(f"cannot back up a ledger at {config.ledger_url.split('://')[0]}://")


def _copy_stores(config: CrawlConfig, blobs: BlobStore, answers: BlobStore, manifest: BackupManifest) -> None:
    """3. The store, last; the API answers kept for the archive (docs/EXPORT.md), a store of
    their own beside the media."""
    live = open_blob_store(config.store_location, local_root=config.store_root)
    copied: BlobCopy = copy_blobs(live, blobs)
    manifest.blobs = asdict(copied)
    copy_blobs(open_answer_store(config.store_location, local_root=config.store_root), answers)


def _copy_config(config: CrawlConfig, dest: Path, manifest: BackupManifest) -> None:
    if config.path is not None and config.path.is_file():
        shutil.copyfile(config.path, dest / CONFIG_COPY)
        manifest.config = CONFIG_COPY


def _copy_instance_yaml(dagster_home: Path, target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dagster_home / "dagster.yaml", target / "dagster.yaml")
    return ["dagster.yaml"]
