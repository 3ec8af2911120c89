"""The example platform's simulator part: two albums of photos in the demo world and
the `/example/albums/<id>?page=N&per_page=M` API that serves them."""
from __future__ import annotations

from dataclasses import dataclass

from media_crawler_sim.catalog import PICK, MediaFile, SourceFiles
from media_crawler_sim.exchange import Request, Response, json_response, not_found
from media_crawler_sim.media import Recipe
from media_crawler_sim.parts import SimulatorPart, SourceSpec

DEMO_ALBUM, GONE_ALBUM = "7", "404"
PHOTOS = 5  # per album, spread over the world's days


@dataclass(frozen=True)
class Photo:
    id: str
    file: MediaFile
    taken_at: str


def build(world) -> None:
    files = SourceFiles(world.catalog, "example", f"example: album {DEMO_ALBUM}")
    photos = []
    for index in range(PHOTOS):
        slot = index * 2 // (PHOTOS - 1) if PHOTOS > 1 else 0
        moment = world.seeded.moment(slot, f"example/{DEMO_ALBUM}/{index}", 9 + index)
        photo_id = world.seeded.digits(f"example/{DEMO_ALBUM}/{index}/id", 8)
        recipe = Recipe("jpeg", f"example/{DEMO_ALBUM}/{index}", 160 + 16 * index, 120)
        file = files.of_post(photo_id, moment.date()).add(f"/media/example/{DEMO_ALBUM}/{photo_id}.jpg", recipe,
                                                          kind="image", item=f"{DEMO_ALBUM}:{photo_id}",
                                                          variant="original", role=PICK)
        photos.append(Photo(photo_id, file, moment.strftime("%Y-%m-%dT%H:%M:%SZ")))
    photos.sort(key=lambda photo: photo.taken_at, reverse=True)  # the API lists newest first
    world.parts["example"] = {DEMO_ALBUM: tuple(photos)}


class ExampleApi:
    prefix = "/example"

    def __init__(self, world) -> None:
        self.world = world

    def handle(self, request: Request, subpath: str) -> Response:
        albums = self.world.parts["example"]
        album = subpath.removeprefix("/albums/")
        if not subpath.startswith("/albums/"):
            return not_found(request.path)
        if album not in albums:
            return json_response({"status": "error", "code": "gone", "message": f"album {album} does not exist"})
        page_text, size_text = request.param("page") or "1", request.param("per_page") or "3"
        if not (page_text.isdigit() and size_text.isdigit()) or int(size_text) < 1:
            return json_response({"status": "error", "code": "bad_request"}, status=400)
        page, size = max(1, int(page_text)), int(size_text)
        photos = albums[album][(page - 1) * size : page * size]
        catalog = self.world.catalog
        listed = [{"id": photo.id, "url": request.base_url + photo.file.path, "taken_at": photo.taken_at,
                   "sha256": catalog.sha256(photo.file), "size": len(catalog.content(photo.file))} for photo in photos]
        more = page * size < len(albums[album])
        return json_response({"status": "ok", "album": album, "photos": listed, "next_page": page + 1 if more else None})


PART = SimulatorPart(
    build=build,
    apis=lambda world, cdn: (ExampleApi(world),),
    demo_sources=(SourceSpec("example", f"album {DEMO_ALBUM}"),),
    fault_sources=(SourceSpec("example", f"album {GONE_ALBUM}"),),
    demo_settings=lambda base_url: {"api_base": f"{base_url}/example", "page_size": 2},
)
