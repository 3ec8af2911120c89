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

What a destination holds follows one publish order (`publish_backup`), the same
for a folder (folder_backup.py) and a bucket (bucket.py): the files are
snapshotted into a work folder first, then the blobs are copied (put-if-absent,
checked against their names), then the files are published, the ledger first,
then Dagster's storage and sources.yaml, and the manifest last. So whenever a
backup is killed, the destination's manifest and ledger name no blob or file it
lacks, the manifest is never newer than its files, and running it again
converges (crash points `after_backup_*`, crashpoints.py).

Leases held at backup time are recorded in the manifest; they are uncertain
by nature (the holder kept working after the snapshot) and restore treats them
so. Staging .part files are not backed up: a restore re-downloads those items.

The manifest also says what is needed to use the backup (format 2), and where
its files are (format 3: `files`, a folder's generation folder):
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
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from media_crawler.config import ConfigError, CrawlConfig
from media_crawler.crashpoints import (
    AFTER_BACKUP_BLOB, AFTER_BACKUP_FILE, AFTER_BACKUP_MANIFEST, AFTER_BACKUP_SNAPSHOTS, crash_point,
)
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
FORMAT = 3  # 2: versions and credential names; 3: the files in the folder `files` names
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
    # Format 3: the folder (beside the manifest) holding the files; "" (a bucket, format 2): beside it.
    files: str = ""

    def write(self, folder: Path) -> str:
        """folder/manifest.json, replaced in one rename (never half written); returns its name."""
        partial = folder / (MANIFEST + ".partial")
        with open(partial, "w") as handle:
            handle.write(json.dumps(asdict(self), indent=2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, folder / MANIFEST)
        return MANIFEST

    @classmethod
    def read(cls, folder: Path) -> "BackupManifest":
        """The manifest; fields a newer format added are kept out (restore checks `format` first)."""
        path = folder / MANIFEST
        if not path.is_file():
            raise NotABackup(f"{folder} is not a media-crawler backup (no {MANIFEST}: not one, or one whose "
                             "first run has not finished)")
        try:
            raw = json.loads(path.read_text())
        except ValueError as exc:
            raise NotABackup(f"{path}: not a media-crawler manifest ({exc})") from None
        if not isinstance(raw, dict):
            raise NotABackup(f"{path}: not a media-crawler manifest")
        known = {item.name for item in fields(cls)}
        return cls(**{name: value for name, value in raw.items() if name in known})


class NotABackup(ConfigError):
    """The folder holds no (readable) manifest, or not the files its manifest names."""


def files_folder(backup_dir: Path, manifest: BackupManifest) -> Path:
    """Where the backup's files are, each checked to be there: one line (NotABackup) otherwise."""
    from media_crawler.recovery.folder_backup import is_generation_name

    if not isinstance(manifest.files, str) or not is_generation_name(manifest.files):
        raise NotABackup(f"{backup_dir}/{MANIFEST}: files {manifest.files!r} is not a folder of this backup")
    folder = backup_dir / manifest.files
    missing = [name for name in backup_files(manifest) if not (folder / name).is_file()]
    if missing:
        raise NotABackup(f"{backup_dir} is incomplete: its manifest names {', '.join(missing[:3])}"
                         f"{' and more' if len(missing) > 3 else ''}, not there")
    return folder


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
        from media_crawler.recovery.bucket import BackupBucket, BucketDestination

        bucket = BackupBucket(str(dest))
        bucket.check("backup to")  # a missing bucket or bad keys: one line, before anything is copied
        destination = BucketDestination(bucket, config.store_root, STORE_DIR)
    else:
        from media_crawler.recovery.folder_backup import FolderDestination

        destination = FolderDestination(Path(dest), MANIFEST, STORE_DIR, LEGACY_FILES)
    return publish_backup(config, dagster_home, destination)


def publish_backup(config: CrawlConfig, dagster_home: Path | None, destination) -> BackupManifest:
    """The publish order, the one place it is kept (the module docstring says why):
    snapshots into destination.work, blobs, files (the ledger first), the manifest last.

    `destination` (folder_backup.FolderDestination, bucket.BucketDestination): `work`, a
    local folder the files are snapshotted into; `blob_store()`/`answer_store()`;
    `publish(name)`, a file of `work` made part of the destination; `publish_manifest(m)`,
    the switch to this backup; `close(published)`, cleaning up after.
    """
    published = False
    try:
        manifest = _new_manifest(config)
        _snapshot_databases(config, dagster_home, destination.work, manifest)
        _copy_config(config, destination.work, manifest)
        crash_point(AFTER_BACKUP_SNAPSHOTS)
        _copy_stores(config, destination.blob_store(), destination.answer_store(), manifest)
        for name in backup_files(manifest):  # the ledger first: Dagster's storage is never newer
            destination.publish(name)
            crash_point(AFTER_BACKUP_FILE)
        manifest.finished_at = time.time()
        destination.publish_manifest(manifest)  # last: the backup is complete
        published = True
        crash_point(AFTER_BACKUP_MANIFEST)
    finally:
        destination.close(published)
    return manifest


def backup_files(manifest: BackupManifest) -> list[str]:
    """The files of a backup besides the manifest and the store, the ledger's first."""
    ledger = [LEDGER_SQLITE] if manifest.ledger == "sqlite" else [LEDGER_PGDUMP]
    dagster = [f"{DAGSTER_DIR}/{name}" for name in manifest.dagster_files]
    if manifest.dagster == "postgres":
        dagster.append(DAGSTER_PGDUMP)
    return ledger + dagster + ([manifest.config] if manifest.config else [])


# A format-2 folder backup's files, beside its manifest: removed once a newer backup is published.
LEGACY_FILES = (LEDGER_SQLITE, LEDGER_PGDUMP, DAGSTER_DIR, DAGSTER_PGDUMP, CONFIG_COPY)


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
        manifest.dagster = "sqlite"  # into a fresh folder: runs deleted since the last backup are left out
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
    copied: BlobCopy = copy_blobs(live, blobs, after_each=lambda: crash_point(AFTER_BACKUP_BLOB))
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
