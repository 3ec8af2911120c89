"""Tests of the download engine (media_crawler.download, media_crawler.http)."""
