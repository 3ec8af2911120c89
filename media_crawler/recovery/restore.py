"""Restore a backup into a fresh location, dispatch paused, leases reconciled.

The new location (`home`) gets:

    store/          the backed-up blobs (staging starts empty)
    ledger.db       the ledger (a PostgreSQL backup goes into the database given instead)
    dagster_home/   Dagster's storage and its dagster.yaml
    sources.yaml    the backed-up sources file, pointed at the new store and ledger
    paused.json     the sensors and schedules that ran before the pause (resume starts them)
    restore.json    what restore did and how long it took

Then, before anything may run: dispatch is paused (dispatch.py), and the
ledger is reconciled against the restored store with every lease treated as
uncertain: the holders kept working after the snapshot, somewhere else.
Rows they were downloading go back to the queue, rows whose blob is in the
store are committed, the rest are downloaded again. Resuming is a separate,
deliberate step (`media-crawler restore --resume --home ...`).

What makes it trustworthy:

- Nothing is copied from a backup newer than this code: a newer manifest
  format, a ledger schema version above SCHEMA_VERSION (read from the
  backed-up SQLite file itself, else from the manifest), or a media-crawler or
  Dagster version above the installed one is refused with the version needed
  (`BackupTooNew`, a ConfigError: one line, exit 2). An older ledger is
  upgraded in place when reconcile opens it.
- The credential variables the backed-up crawl read (names in the manifest)
  are checked in this environment; missing ones are reported, and
  `resume` refuses (dispatch stays paused) until they are set.
- The recovery times are measured: copying, pausing dispatch, reconciling,
  and, once a partition has run in the restored instance, the time from the
  start of the restore to the end of its first successful run
  (`recovery_times`, written back into restore.json by `resume`).
"""
from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from media_crawler.dagster_home import INSTANCE_TEMPLATE
from media_crawler.config import ConfigError
from media_crawler.environment import environment_value, set_environment
from media_crawler.recovery import backup as layout
from media_crawler.recovery.copying import copy_blobs, copy_tree_of_sqlite, pg_restore, sqlite_copy
from media_crawler.recovery.dispatch import LOCATION_NAME, DispatchPause, pause_dispatch, resume_dispatch
from media_crawler.store.urls import display_url

RESTORE_FILE = "restore.json"
DAGSTER_PG_ENV = "DAGSTER_PG_URL"  # what deploy/dagster.postgres.yaml reads


class BackupTooNew(ConfigError):
    """The backup was written by newer code than this: restoring it here could misread it."""


class CredentialsMissing(ConfigError):
    """Credential variables the restored crawl reads are not set: dispatch stays paused."""


@dataclass
class RestoreSummary:
    home: str
    ledger_url: str
    dagster_home: str
    config_path: str | None
    blobs: int = 0
    pause: dict = field(default_factory=dict)
    reconcile: dict = field(default_factory=dict)  # finding counts
    restore_s: float = 0.0  # copy_s + pause_s
    reconcile_s: float = 0.0
    copy_s: float = 0.0  # blobs, ledger, Dagster's storage, sources.yaml
    pause_s: float = 0.0  # dispatch paused in the restored instance
    started_at: float = 0.0  # wall clock: the first successful partition is measured from here
    finished_at: float = 0.0
    versions: dict = field(default_factory=dict)  # the backup's and this code's
    credentials_required: list[str] = field(default_factory=list)  # names only
    credentials_missing: list[str] = field(default_factory=list)  # not set where restore ran
    first_successful_partition: dict | None = None  # filled in by resume / recovery_times


def restore(backup_dir: Path | str, home: Path, *, ledger_url: str | None = None, dagster_pg_url: str | None = None,
            location_name: str = LOCATION_NAME, store_uri: str | None = None) -> RestoreSummary:
    """backup_dir: the backup folder, or the s3://BUCKET/PREFIX a backup was written to
    (its files are fetched beside `home` first, checked against their sha256, and removed
    at the end; the blobs are copied from the bucket). store_uri: an s3://BUCKET/PREFIX to
    restore the blobs into (an empty one) instead of HOME/store."""
    from media_crawler.store.open_store import is_object_store

    if not is_object_store(backup_dir):
        return _restore(Path(backup_dir), home, ledger_url=ledger_url, dagster_pg_url=dagster_pg_url,
                        location_name=location_name, store_uri=store_uri, source=None)
    from media_crawler.recovery.bucket import BackupBucket, work_folder

    _refuse_nonempty(home)  # before anything is fetched
    bucket = BackupBucket(str(backup_dir))
    bucket.check("restore from")
    work = work_folder(home.absolute().parent, f"{backup_dir} -> {home.absolute()}")
    try:
        bucket.get(layout.MANIFEST, work)
        for name in layout.backup_files(layout.BackupManifest.read(work)):
            bucket.get(name, work)
        return _restore(work, home, ledger_url=ledger_url, dagster_pg_url=dagster_pg_url,
                        location_name=location_name, store_uri=store_uri, source=bucket)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _refuse_nonempty(home: Path) -> None:
    if home.exists() and any(home.iterdir()):
        # A usage error (exit 2, one line), not a failure on the way: nothing was touched.
        raise ConfigError(f"{home} is not empty: restore only into a fresh location (a new or empty --home)")


def _restore(backup_dir: Path, home: Path, *, ledger_url: str | None, dagster_pg_url: str | None,
             location_name: str, store_uri: str | None, source) -> RestoreSummary:
    """source: the BackupBucket the blobs come from (None: backup_dir/store)."""
    from dagster import DagsterInstance

    from media_crawler.recovery.reconcile import reconcile
    from media_crawler.store.open_store import open_answer_store, open_blob_store
    from media_crawler.store.ledger import Ledger

    manifest = layout.BackupManifest.read(backup_dir)
    versions = check_compatible(manifest, backup_dir)  # before anything is copied
    files = layout.files_folder(backup_dir, manifest)  # every file the manifest names is there
    _refuse_nonempty(home)
    started_at, started = time.time(), time.monotonic()
    store_location = store_uri or home / "store"
    if store_uri is not None:
        _check_fresh_bucket(store_uri)
    home.mkdir(parents=True, exist_ok=True)
    store = open_blob_store(store_location, create=True, local_root=home / "store")
    if source is None:
        backed_up = open_blob_store(backup_dir / layout.STORE_DIR)
        backed_up_answers = open_answer_store(backup_dir / layout.STORE_DIR)
    else:
        backed_up = source.blob_store(layout.STORE_DIR, backup_dir)
        backed_up_answers = source.answer_store(layout.STORE_DIR, backup_dir)
    blobs = copy_blobs(backed_up, store)
    # The kept API answers (none in a backup made before they were kept).
    copy_blobs(backed_up_answers, open_answer_store(store_location, create=True, local_root=home / "store"))
    ledger_url = _restore_ledger(manifest, files, home, ledger_url)
    dagster_home, dagster_pg_url = _restore_dagster(manifest, files, home, ledger_url, dagster_pg_url)
    config_path = _restore_config(manifest, files, home, ledger_url, str(store_location))
    summary = RestoreSummary(str(home), display_url(ledger_url), str(dagster_home), config_path, blobs.copied,
                             started_at=started_at, versions=versions)
    summary.credentials_required = layout.required_credentials(manifest.credentials)
    summary.credentials_missing = missing_credentials(summary.credentials_required)
    summary.copy_s = time.monotonic() - started

    paused = time.monotonic()
    with _environment(DAGSTER_PG_ENV, dagster_pg_url), DagsterInstance.from_config(str(dagster_home)) as instance:
        pause = pause_dispatch(instance, location_name)
    pause.write(home)
    summary.pause = asdict(pause)
    summary.pause_s = time.monotonic() - paused
    summary.restore_s = time.monotonic() - started

    started = time.monotonic()
    report = reconcile(Ledger(ledger_url), store, repair=True, uncertain_leases=True,
                       part_grace_s=0.0)
    summary.reconcile = dict(report.counts())
    summary.reconcile_s = time.monotonic() - started
    summary.finished_at = time.time()
    _write_summary(home, summary)
    return summary


def resume(home: Path, *, dagster_pg_url: str | None = None, location_name: str = LOCATION_NAME,
           allow_missing: tuple[str, ...] = ()) -> list[str]:
    """Start again what ran before the pause; returns the sensor and schedule names.

    Refused (CredentialsMissing, dispatch stays paused) while a credential
    variable the restored crawl reads is unset here, unless `allow_missing`
    names it. Records the recovery times measured so far in restore.json.
    """
    from dagster import DagsterInstance

    summary = read_summary(home)
    if summary is not None:
        missing = [name for name in missing_credentials(summary.credentials_required) if name not in allow_missing]
        if missing:
            raise CredentialsMissing(
                f"dispatch stays paused: credential variable(s) {', '.join(missing)} not set in this environment "
                "(the restored crawl reads them); set them and run `restore --resume` again, or pass "
                "--allow-missing NAME for one the crawl no longer needs")
    with _environment(DAGSTER_PG_ENV, dagster_pg_url), \
            DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        started = resume_dispatch(instance, DispatchPause.read(home), location_name)
        if summary is not None:
            summary.first_successful_partition = first_successful_partition(instance, summary.started_at)
            _write_summary(home, summary)
    return started


def recovery_times(home: Path, *, dagster_pg_url: str | None = None) -> RestoreSummary:
    """restore.json with the first successful partition measured now (and recorded)."""
    from dagster import DagsterInstance

    summary = read_summary(home)
    if summary is None:
        raise ConfigError(f"{home} holds no {RESTORE_FILE}: not a restored location")
    with _environment(DAGSTER_PG_ENV, dagster_pg_url), \
            DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        summary.first_successful_partition = first_successful_partition(instance, summary.started_at)
    _write_summary(home, summary)
    return summary


def first_successful_partition(instance, since: float) -> dict | None:
    """The run that finished successfully first among those started after `since` (wall clock)."""
    from datetime import datetime, timezone

    from dagster import DagsterRunStatus, RunsFilter

    records = instance.get_run_records(RunsFilter(
        statuses=[DagsterRunStatus.SUCCESS], created_after=datetime.fromtimestamp(since, tz=timezone.utc)))
    finished = [record for record in records
                if record.end_time is not None and (record.start_time or record.end_time) >= since]
    if not finished:
        return None
    first = min(finished, key=lambda record: record.end_time)
    from media_crawler.shards import partitions_of_run

    keys = partitions_of_run(first.dagster_run.tags)  # one, or the partitions of a ranged run
    return {"run_id": first.dagster_run.run_id, "partition": " ".join(keys) if keys else None,
            "ended_at": first.end_time, "after_restore_began_s": round(first.end_time - since, 3)}


def read_summary(home: Path) -> RestoreSummary | None:
    path = home / RESTORE_FILE
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    known = set(RestoreSummary.__dataclass_fields__)
    return RestoreSummary(**{name: value for name, value in raw.items() if name in known})


def _write_summary(home: Path, summary: RestoreSummary) -> None:
    (home / RESTORE_FILE).write_text(json.dumps(asdict(summary), indent=2))


def missing_credentials(names: list[str], environ=None) -> list[str]:
    """The names whose variable is unset or empty (in `environ`, default this process's)."""
    present = environ.get if environ is not None else environment_value
    return [name for name in names if not present(name)]


# -- may this code read the backup? ------------------------------------------------
def check_compatible(manifest: layout.BackupManifest, backup_dir: Path) -> dict:
    """The backup's versions beside this code's; BackupTooNew when the backup is newer."""
    from dagster import __version__ as dagster_version

    from media_crawler.store.schema import SCHEMA_VERSION

    ours = {"media_crawler": layout.installed_version(layout.PROJECT), "dagster": dagster_version,
            "ledger_schema": SCHEMA_VERSION, "format": layout.FORMAT}
    from media_crawler.recovery.folder_backup import is_generation_name

    schema_version = manifest.ledger_schema_version
    files = manifest.files if isinstance(manifest.files, str) and is_generation_name(manifest.files) else ""
    if manifest.ledger == "sqlite" and (backup_dir / files / layout.LEDGER_SQLITE).is_file():
        # The snapshot itself is the authority (a format-1 manifest does not say).
        schema_version = _sqlite_schema_version(backup_dir / files / layout.LEDGER_SQLITE) or schema_version
    theirs = {"media_crawler": manifest.media_crawler_version, "dagster": manifest.dagster_version,
              "ledger_schema": schema_version, "format": manifest.format}
    refusals, needed = [], []
    if manifest.format > layout.FORMAT:
        refusals.append(f"its manifest is format {manifest.format}, this media-crawler ({ours['media_crawler']}) "
                        f"reads up to format {layout.FORMAT}")
    if schema_version is not None and schema_version > SCHEMA_VERSION:
        refusals.append(f"its ledger is at schema version {schema_version}, this media-crawler "
                        f"({ours['media_crawler']}) reads up to version {SCHEMA_VERSION}")
    if _newer(theirs["media_crawler"], ours["media_crawler"]):
        refusals.append(f"it was written by media-crawler {theirs['media_crawler']}, this is {ours['media_crawler']}")
    if _newer(theirs["media_crawler"], ours["media_crawler"]):
        needed.append(f"media-crawler>={theirs['media_crawler']}")
    elif refusals:  # same version number, newer layout (a development build): say what it must read
        needed.append(f"a media-crawler that reads ledger schema version {schema_version} and manifest format "
                      f"{manifest.format} (this backup was written by media-crawler "
                      f"{theirs['media_crawler'] or '(not recorded)'})")
    if _newer(theirs["dagster"], ours["dagster"]):
        refusals.append(f"its Dagster storage was written by dagster {theirs['dagster']}, this is {ours['dagster']}")
        needed.append(f"dagster>={theirs['dagster']}")
    if refusals:
        raise BackupTooNew(f"refusing to restore a backup newer than this code: {'; '.join(refusals)}. "
                           f"Restore it with {' and '.join(needed)}")
    return {"backup": theirs, "code": ours,
            "ledger_upgraded": schema_version is not None and schema_version < SCHEMA_VERSION}


def _newer(theirs: str | None, ours: str | None) -> bool:
    """Is version `theirs` above `ours`? Unknown versions never refuse."""
    if not theirs or not ours:
        return False
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # packaging comes with Dagster; without it, compare the release numbers
        return _release(theirs) > _release(ours)
    try:
        return Version(theirs) > Version(ours)
    except InvalidVersion:
        return False


def _release(version: str) -> tuple[int, ...]:
    import re

    return tuple(int(part) for part in re.findall(r"\d+", version.split("+", 1)[0])[:3])


def _sqlite_schema_version(path: Path) -> int | None:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        try:
            return conn.execute("SELECT max(version) FROM mc_schema_version").fetchone()[0]
        except sqlite3.OperationalError:  # no such table: a ledger from before versioning
            return None


def _restore_ledger(manifest, backup_dir: Path, home: Path, ledger_url: str | None) -> str:
    if manifest.ledger == "sqlite":
        sqlite_copy(backup_dir / layout.LEDGER_SQLITE, home / "ledger.db")
        return f"sqlite:///{home / 'ledger.db'}"
    if not ledger_url:
        raise ValueError("a PostgreSQL backup needs --ledger-url: an empty database to restore into")
    pg_restore(backup_dir / layout.LEDGER_PGDUMP, ledger_url)
    return ledger_url


def _restore_dagster(manifest, backup_dir: Path, home: Path, ledger_url: str,
                     dagster_pg_url: str | None) -> tuple[Path, str | None]:
    target = home / "dagster_home"
    if manifest.dagster == "sqlite":
        copy_tree_of_sqlite(backup_dir / layout.DAGSTER_DIR, target)
        return target, None
    target.mkdir(parents=True)
    if manifest.dagster == "none":
        shutil.copyfile(INSTANCE_TEMPLATE, target / "dagster.yaml")
        return target, None
    shutil.copyfile(backup_dir / layout.DAGSTER_DIR / "dagster.yaml", target / "dagster.yaml")
    if manifest.dagster == "shared-with-ledger":
        return target, dagster_pg_url or ledger_url  # restored with the ledger's dump
    if not dagster_pg_url:
        raise ValueError("this backup's Dagster storage is on PostgreSQL: pass --dagster-pg-url (an empty database)")
    pg_restore(backup_dir / layout.DAGSTER_PGDUMP, dagster_pg_url)
    return target, dagster_pg_url


def _check_fresh_bucket(location: str) -> None:
    """A restore writes into an empty store only, a bucket prefix too (ConfigError, before anything is copied)."""
    from media_crawler.store.open_store import is_object_store, open_blob_store

    if not is_object_store(location):
        raise ConfigError(f"--store {location!r}: restore takes s3://BUCKET/PREFIX (a folder store is HOME/store)")
    if next(iter(open_blob_store(location, local_root=Path(".")).iter_sha256s()), None) is not None:
        raise ConfigError(f"{location} holds blobs already: restore only into an empty bucket prefix")


def _restore_config(manifest, backup_dir: Path, home: Path, ledger_url: str, store_location: str) -> str | None:
    if not manifest.config:
        return None
    raw = yaml.safe_load((backup_dir / manifest.config).read_text()) or {}
    raw["store"] = store_location
    if ledger_url.startswith("sqlite"):
        raw["ledger_url"] = ledger_url
    else:
        raw.pop("ledger_url", None)  # a PostgreSQL URL may carry a password: MEDIA_CRAWLER_LEDGER_URL supplies it
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


@contextmanager
def _environment(name: str, value: str | None):
    """Set one environment variable for a block (when value is not None)."""
    saved = environment_value(name)
    if value is not None:
        set_environment(name, value)
    try:
        yield
    finally:
        if value is not None:
            set_environment(name, saved)
