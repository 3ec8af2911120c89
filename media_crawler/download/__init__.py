"""The download engine: streaming .part downloads with resume, classified retries, rate budgets, DASH mux."""
from media_crawler.download.fetcher import DownloadResult, download_to_part
from media_crawler.download.pool import Outcome, run_bounded
from media_crawler.download.ratebudget import InMemoryRateBudget, SharedRateBudget
from media_crawler.download.retry import AttemptReport, RateBudget, RetryLoop, download_with_retries

__all__ = [
    "AttemptReport",
    "DownloadResult",
    "InMemoryRateBudget",
    "Outcome",
    "RateBudget",
    "RetryLoop",
    "SharedRateBudget",
    "download_to_part",
    "download_with_retries",
    "run_bounded",
]
