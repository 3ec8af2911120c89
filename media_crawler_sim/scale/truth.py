"""The truth and the sources, in pages or as a stream, for either world.

- `truth(...)`: what `/_sim/truth` answers (the demo world's whole table; a generated
  world's `header`, which lists no media: it points at the pages below).
- `media_page(..., cursor, limit)`: up to `limit` (<= MAX_LIMIT) truth entries from an
  opaque cursor, with `next_cursor` (None at the end). The demo world's cursor is an
  offset into its `/_sim/truth` media list; a generated world's names the next
  (platform, account, day, post, pick), so a page costs O(limit) whatever the size.
- `media_stream(...)`: every entry as NDJSON lines, made as they are sent.
- `sources_page(...)` / `sources_yaml(...)`: sources.yaml entries (`{platform: spec,
  ...options}`), paged, or the whole sources.yaml (the demo's platforms block, API
  bases on this simulator) streamed.
"""
from __future__ import annotations

import json
from typing import Iterator

import yaml

from media_crawler_sim.catalog import ALTERNATE, FAULT, PICK, MediaFile
from media_crawler_sim.scale.content import PostKey

DEFAULT_LIMIT, MAX_LIMIT = 500, 5_000
_CHUNK = 200  # entries per streamed chunk


def media_entry(world, file: MediaFile, base_url: str) -> dict:
    """One truth entry: where the file is served, what it is, and its bytes' sha256."""
    data = world.catalog.content(file)
    sha256 = world.catalog.sha256(file)
    source = file.source.replace("urls: /", f"urls: {base_url}/")
    return {
        "platform": file.platform,
        "source": source,
        "path": file.path,
        "sha256": sha256,
        "size": len(data),
        "kind": file.kind,
        "mime": file.mime,
        "day": file.day.isoformat() if file.day else None,
        "post": file.post,
        "item": file.item or sha256,  # URL-list files are known by their content
        "variant": file.variant,
    }


def clamp_limit(asked: str | None) -> int:
    if not asked:
        return DEFAULT_LIMIT
    if not asked.isdigit():
        raise ValueError("limit must be a number")
    return max(1, min(MAX_LIMIT, int(asked)))


def header(world, base_url: str) -> dict:
    """A generated world's /_sim/truth: what it is and where its entries are read."""
    size = world.size
    return {
        "seed": world.seed,
        "base_url": base_url,
        "days": [day.isoformat() for day in world.days],
        "generated": True,
        "size": size.as_json(),
        "accounts": {platform: size.accounts(platform) for platform in world.platforms},
        "posts": sum(size.accounts(platform) for platform in world.platforms) * world.posts_per_account,
        "wbi": {"img_key": world.wbi_img_key, "sub_key": world.wbi_sub_key},
        "media_pages": f"{base_url}/_sim/truth/media?limit={DEFAULT_LIMIT}",
        "media_stream": f"{base_url}/_sim/truth.ndjson",
        "sources_pages": f"{base_url}/_sim/sources?limit={DEFAULT_LIMIT}",
        "sources_yaml": f"{base_url}/_sim/sources.yaml",
    }


def truth(world, base_url: str, fault_book) -> dict:
    """What GET /_sim/truth answers: the demo world's whole table, a generated world's header."""
    if world.is_generated:  # never one whole-table answer: the header points at the pages
        return header(world, base_url)
    catalog = world.catalog
    picks, seen = [], set()
    for file in catalog.files(PICK):
        entry = media_entry(world, file, base_url)
        if entry["sha256"] not in seen:  # dedup by content, like the blob store
            seen.add(entry["sha256"])
            picks.append(entry)
    alternates = [media_entry(world, file, base_url) for file in catalog.files(ALTERNATE)]
    fault_entries = [
        {**media_entry(world, file, base_url), "fault": fault_book.planned(file.path)}
        for file in catalog.files(FAULT)
    ]
    return {
        "seed": world.seed,
        "base_url": base_url,
        "days": [day.isoformat() for day in world.days],
        "sources": [source.as_json(base_url) for source in world.demo_sources],
        "fault_sources": [source.as_json(base_url) for source in world.fault_sources],
        "wbi": {"img_key": world.wbi_img_key, "sub_key": world.wbi_sub_key},
        "media": picks,
        "alternates": [entry for entry in alternates if entry["sha256"] not in seen],
        "faults": fault_entries,
    }


# --- media -------------------------------------------------------------------------

def _generated_entries(world, base_url: str, start: tuple[PostKey, int] | None) -> Iterator[tuple[str, dict]]:
    """(cursor of this entry, entry) for every pick from `start` on."""
    key, skip = start if start is not None else (None, 0)
    for post_key in world.post_keys(key):
        picks = world.generated(post_key).picks
        for index in range(skip, len(picks)):
            cursor = f"{world.platforms.index(post_key.platform)}.{post_key.account}.{post_key.day}.{post_key.post}.{index}"
            yield cursor, media_entry(world, picks[index], base_url)
        skip = 0


def _parse_cursor(world, cursor: str) -> tuple[PostKey, int]:
    try:
        platform, account, day, post, index = (int(part) for part in cursor.split("."))
        return PostKey(world.platforms[platform], account, day, post), index
    except (ValueError, IndexError):
        raise ValueError(f"bad cursor {cursor!r}") from None


def media_page(world, base_url: str, fault_book, cursor: str | None, limit: int) -> dict:
    if not world.is_generated:
        media = truth(world, base_url, fault_book)["media"]
        if cursor and not cursor.isdigit():
            raise ValueError(f"bad cursor {cursor!r}")
        offset = int(cursor or 0)
        page = media[offset : offset + limit]
        following = str(offset + limit) if offset + limit < len(media) else None
    else:
        page, following = [], None
        for position, entry in _generated_entries(world, base_url, _parse_cursor(world, cursor) if cursor else None):
            if len(page) == limit:
                following = position
                break
            page.append(entry)
    answer = {"media": page, "next_cursor": following}
    if following is not None:
        answer["next"] = f"{base_url}/_sim/truth/media?limit={limit}&cursor={following}"
    return answer


def iter_media(world, base_url: str, fault_book=None) -> Iterator[dict]:
    """Every truth entry (the picks), one at a time."""
    if world.is_generated:
        for _, entry in _generated_entries(world, base_url, None):
            yield entry
    else:
        yield from truth(world, base_url, fault_book)["media"]


def media_stream(world, base_url: str, fault_book) -> Iterator[bytes]:
    lines = []
    for entry in iter_media(world, base_url, fault_book):
        lines.append(json.dumps(entry, separators=(",", ":")) + "\n")
        if len(lines) == _CHUNK:
            yield "".join(lines).encode()
            lines = []
    if lines:
        yield "".join(lines).encode()


# --- sources -----------------------------------------------------------------------

def source_entry(spec, base_url: str) -> dict:
    """A sources.yaml line: `{platform: spec, ...options}` (URL lists on this simulator)."""
    text = base_url + spec.spec if spec.spec.startswith("/") else spec.spec
    return {spec.platform: text, **dict(spec.options)}


def _specs(world, start: tuple[int, int] | None = None):
    if world.is_generated:
        yield from world.source_specs(start or (0, 0))
    else:
        for index, spec in enumerate(world.demo_sources[start[1] if start else 0 :], start=start[1] if start else 0):
            yield (0, index), spec


def iter_sources(world, base_url: str) -> Iterator[dict]:
    for _, spec in _specs(world):
        yield source_entry(spec, base_url)


def sources_page(world, base_url: str, cursor: str | None, limit: int) -> dict:
    start = None
    if cursor:
        try:
            platform, account = (int(part) for part in cursor.split("."))
        except ValueError:
            raise ValueError(f"bad cursor {cursor!r}") from None
        start = (platform, account)
    page, following = [], None
    for position, spec in _specs(world, start):
        if len(page) == limit:
            following = f"{position[0]}.{position[1]}"
            break
        page.append(source_entry(spec, base_url))
    answer = {"sources": page, "next_cursor": following}
    if following is not None:
        answer["next"] = f"{base_url}/_sim/sources?limit={limit}&cursor={following}"
    return answer


def sources_config_head(base_url: str) -> dict:
    """sources.yaml without its sources: the demo's platforms block, pointed at `base_url`."""
    from media_crawler_sim.sources import demo_sources

    config = demo_sources(base_url)
    config.pop("sources")
    return config


def sources_yaml(world, base_url: str) -> Iterator[str]:
    """The whole sources.yaml for every account, a chunk at a time."""
    yield yaml.safe_dump(sources_config_head(base_url), sort_keys=False)
    yield "sources:\n"
    chunk = []
    for entry in iter_sources(world, base_url):
        chunk.append(yaml.safe_dump([entry], sort_keys=False))
        if len(chunk) == _CHUNK:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)
