"""A Facebook post as the Graph API spells it: `attachments{data[]}` with photo, video
(`media.source`, `target.id`) and album (`subattachments.data[]`) entries."""
from __future__ import annotations

from media_crawler_sim.cdn import CdnRules
from media_crawler_sim.content.facebook import Attachment, Photo, Post

_STATUS_TYPES = {"photo": "added_photos", "album": "added_photos", "video": "added_video"}


def graph_time(post: Post) -> str:
    return post.created.strftime("%Y-%m-%dT%H:%M:%S+0000")


def post_json(post: Post, fields: set[str], base_url: str, cdn: CdnRules) -> dict:
    """The post with only the requested top-level fields (Graph semantics)."""
    first_type = post.attachments[0].media_type if post.attachments else ""
    full = {
        "id": post.id,
        "created_time": graph_time(post),
        "updated_time": graph_time(post),
        "message": post.message,
        "permalink_url": post.permalink_url,
        "status_type": _STATUS_TYPES.get(first_type, "mobile_status_update"),
    }
    if post.attachments:
        first = post.attachments[0]
        cover = first.video.poster if first.video is not None else first.photos[0]
        full["full_picture"] = cdn.url(base_url, cover.file)
        full["attachments"] = {"data": [_attachment(post, attachment, base_url, cdn) for attachment in post.attachments]}
    return {key: value for key, value in full.items() if key in fields}


def _image(photo: Photo, base_url: str, cdn: CdnRules) -> dict:
    return {"image": {"height": photo.height, "src": cdn.url(base_url, photo.file), "width": photo.width}}


def _photo_url(post: Post, photo: Photo) -> str:
    return f"https://www.facebook.com/{post.page_id}/photos/{photo.target_id}/?type=3"


def _attachment(post: Post, attachment: Attachment, base_url: str, cdn: CdnRules) -> dict:
    if attachment.media_type == "video":
        video = attachment.video
        url = f"https://www.facebook.com/{post.page_id}/videos/{video.target_id}/"
        return {
            "media_type": "video", "type": "video_inline",
            "media": {**_image(video.poster, base_url, cdn), "source": cdn.url(base_url, video.file)},
            "target": {"id": video.target_id, "url": url}, "title": f"sim video {video.target_id}",
            "url": url, "unshimmed_url": url,
        }
    if attachment.media_type == "album":
        return {
            "media_type": "album", "type": "album",
            "target": {"id": attachment.target_id, "url": post.permalink_url}, "title": "sim album",
            "url": post.permalink_url, "unshimmed_url": post.permalink_url,
            "subattachments": {"data": [
                {"media": _image(photo, base_url, cdn), "target": {"id": photo.target_id, "url": _photo_url(post, photo)},
                 "type": "photo", "url": _photo_url(post, photo)}
                for photo in attachment.photos
            ]},
        }
    photo = attachment.photos[0]
    return {
        "media_type": "photo", "type": "photo", "media": _image(photo, base_url, cdn),
        "target": {"id": photo.target_id, "url": _photo_url(post, photo)}, "url": _photo_url(post, photo),
    }
