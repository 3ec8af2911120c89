"""The code location's entry point (workspace.yaml points here)."""
from dagster import Definitions

from media_crawler.defs.assets import committed_media, media_downloads, media_records, verified_media
from media_crawler.defs.celery import build_celery_crawl_job
from media_crawler.defs.jobs import crawl_job, daily_crawl_schedule, source_registration_sensor, unfinished_partitions_sensor
from media_crawler.defs.resources import CrawlerResource

CRAWL_ASSETS = [media_records, media_downloads, verified_media, committed_media]

defs = Definitions(
    assets=CRAWL_ASSETS,
    # crawl_celery exists only where dagster-celery is installed (pip install -e '.[celery]').
    jobs=[job for job in (crawl_job, build_celery_crawl_job()) if job is not None],
    schedules=[daily_crawl_schedule],
    sensors=[source_registration_sensor, unfinished_partitions_sensor],
    resources={"crawler": CrawlerResource()},
)
