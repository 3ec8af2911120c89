"""media-crawler: a Dagster code location and `media-crawler` commands that crawl platform
feeds and URL lists into a verified, content-addressed archive (README.md)."""

# The version, written here only: pyproject.toml reads it ([tool.setuptools.dynamic]),
# and the media path's User-Agent names it without importlib.metadata (a look-up over
# sys.path and a parse of the whole METADATA file, README included, before fetch-urls'
# first request: issue 31).
__version__ = "0.1.0"
