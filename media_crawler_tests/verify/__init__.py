"""Tests of media verification (media_crawler.verify)."""
