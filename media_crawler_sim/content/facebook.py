"""Facebook demo content: page 42 (cursor paging) and page 43 (time-based paging).

Posts carry photo, video (media.source + target.id, with a poster image) and album
(subattachments) attachments, plus a text-only post. Picks: every photo and every
video source; video posters are alternates (the `full_picture` of a photo post is the
photo itself).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from media_crawler_sim.catalog import ALTERNATE, FACEBOOK, PICK, MediaCatalog, MediaFile, PostFiles, SourceFiles
from media_crawler_sim.media import Recipe
from media_crawler_sim.seeded import Seeded

CURSOR_PAGE, TIME_PAGE = "42", "43"
PAGING = {CURSOR_PAGE: "cursor", TIME_PAGE: "time"}
# page -> posts as (kind, slot, UTC hour); kinds: photo, png-photo, video, album-<n>, text
PLANS = {
    CURSOR_PAGE: (("photo", 0, 8), ("album-4", 0, 17), ("video", 1, 6), ("text", 1, 13), ("png-photo", 2, 4), ("video", 2, 21)),
    TIME_PAGE: (("photo", 0, 11), ("video", 1, 3), ("album-2", 1, 15), ("photo", 2, 9), ("photo", 2, 19)),
}
PHOTO_SIZES = ((720, 540), (720, 405), (540, 720), (640, 640))


@dataclass(frozen=True)
class Photo:
    target_id: str
    file: MediaFile
    width: int
    height: int


@dataclass(frozen=True)
class Video:
    target_id: str
    file: MediaFile
    poster: Photo
    length: float
    created: datetime


@dataclass(frozen=True)
class Attachment:
    media_type: str  # photo | video | album
    target_id: str
    photos: tuple[Photo, ...] = ()  # one for a photo, all of an album
    video: Video | None = None


@dataclass(frozen=True)
class Post:
    id: str
    page_id: str
    created: datetime
    message: str
    attachments: tuple[Attachment, ...] = ()

    @property
    def permalink_url(self) -> str:
        return f"https://www.facebook.com/{self.page_id}/posts/{self.id.split('_')[1]}/"


@dataclass(frozen=True)
class Page:
    page_id: str
    name: str
    paging: str  # cursor | time
    posts: tuple[Post, ...]  # newest first


def build(seeded: Seeded, catalog: MediaCatalog) -> tuple[dict[str, Page], dict[str, Video]]:
    """The pages and every video by its id (the `/{video-id}` node)."""
    pages, videos = {}, {}
    for page_id, plan in PLANS.items():
        files = SourceFiles(catalog, "facebook", f"facebook: page {page_id}")
        posts = [_post(seeded, files, page_id, index, *entry) for index, entry in enumerate(plan)]
        posts.sort(key=lambda post: post.created, reverse=True)
        pages[page_id] = Page(page_id, f"Sim Page {page_id}", PAGING[page_id], tuple(posts))
        for post in posts:
            for attachment in post.attachments:
                if attachment.video is not None:
                    videos[attachment.video.target_id] = attachment.video
    return pages, videos


def _post(seeded: Seeded, files: SourceFiles, page_id: str, index: int, kind: str, slot: int, hour: int) -> Post:
    key = f"facebook/{page_id}/{index}"
    created = seeded.moment(slot, key, hour)
    post_id = f"{page_id}_{seeded.digits(key + '/id', 16)}"
    message = f"sim {kind} post {index + 1} on page {page_id}"
    if kind == "text":
        return Post(post_id, page_id, created, message)
    post_files = files.of_post(post_id, created.date())
    if kind == "video":
        attachment = _video(seeded, post_files, key, created)
    elif kind.startswith("album-"):
        count = int(kind.split("-")[1])
        photos = tuple(_photo(seeded, post_files, f"{key}/{n}") for n in range(count))
        attachment = Attachment("album", seeded.digits(key + "/album", 16), photos)
    else:
        photo = _photo(seeded, post_files, key, fmt="png" if kind == "png-photo" else "jpeg")
        attachment = Attachment("photo", photo.target_id, (photo,))
    return Post(post_id, page_id, created, message, (attachment,))


def _photo(
    seeded: Seeded, files: PostFiles, key: str,
    *, fmt: str = "jpeg", role: str = PICK, variant: str = "image", item: str | None = None,
) -> Photo:
    target_id = seeded.digits(key + "/target", 16)
    width, height = PHOTO_SIZES[seeded.rng(key + "/size").randrange(len(PHOTO_SIZES))]
    if fmt == "png":  # PNG does not compress our gradients as well: keep it small
        width, height = width // 2, height // 2
    folder = "t15.5256-10" if variant == "poster" else "t39.30808-6"
    name = f"{seeded.digits(key + '/name', 9)}_{seeded.hex(key + '/name', 16)}_n.{'png' if fmt == 'png' else 'jpg'}"
    file = files.add(
        f"/media/facebook/v/{folder}/{name}", Recipe(fmt, key, width, height),
        kind="image", item=item or target_id, variant=variant, cdn=FACEBOOK, role=role,
    )
    return Photo(target_id, file, width, height)


def _video(seeded: Seeded, files: PostFiles, key: str, created: datetime) -> Attachment:
    target_id = seeded.digits(key + "/target", 16)
    name = f"{seeded.digits(key + '/video', 9)}_{seeded.digits(key + '/video2', 9)}_n.mp4"
    size = 120_000 + seeded.rng(key).randint(0, 80_000)
    file = files.add(
        f"/media/facebook/v/t42.1790-2/{name}", Recipe("mp4", key + "/video", 720, 1280, size),
        kind="video", item=target_id, variant="source", cdn=FACEBOOK,
    )
    poster = _photo(seeded, files, key + "/poster", role=ALTERNATE, variant="poster", item=target_id)
    length = round(5 + seeded.rng(key + "/length").random() * 60, 3)
    return Attachment("video", target_id, video=Video(target_id, file, poster, length, created))
