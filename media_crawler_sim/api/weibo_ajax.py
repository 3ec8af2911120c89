"""weibo.com ajax under /weibo: `ajax/statuses/mymblog` (page paging), `ajax/statuses/show`
(the full mblog at the top level next to `ok`) and `ajax/statuses/longtext`. Serves
the users configured for the ajax API (679).

Paging: `page=1,2,...`, PAGE_SIZE posts a page, newest first; `data.since_id` is a
non-empty token while more pages follow and "" on the last page; a page past the end
answers an empty `data.list`. A feed mblog lists at most 9 `pic_ids` while `pic_num`
counts them all; long posts carry `isLongText` and a truncated text.
"""
from __future__ import annotations

from media_crawler_sim.api.weibo_format import VISIBLE, counts, created_at, tombstone
from media_crawler_sim.cdn import CdnRules
from media_crawler_sim.content.weibo import FEED_PICTURE_LIMIT, Picture, Post, VideoClip
from media_crawler_sim.exchange import Request, Response, json_response
from media_crawler_sim.world import World

PAGE_SIZE = 3
NOT_FOUND = {"ok": 0, "message": "暂无查看权限"}
# pic_infos size name -> URL size segment; thumbnails are real downscales
PICTURE_SIZES = {
    "thumbnail": "wap180", "bmiddle": "wap360", "large": "orj960", "original": "orj1080", "largest": "large", "mw2000": "mw2000",
}
QUALITY_CLASSES = {0: ("流畅", "SD"), 1: ("标清", "SD"), 2: ("高清", "HD")}


class WeiboAjaxApi:
    prefix = "/weibo"

    def __init__(self, world: World, cdn: CdnRules) -> None:
        self.world, self.cdn = world, cdn
        self.routes = {
            "/ajax/statuses/mymblog": self.mymblog,
            "/ajax/statuses/show": self.show,
            "/ajax/statuses/longtext": self.longtext,
        }

    def handle(self, request: Request, subpath: str) -> Response:
        route = self.routes.get(subpath)
        if route is None:
            return json_response({"ok": 0, "message": "not found"}, status=404)
        try:
            return route(request)
        except ValueError:  # page is not a number
            return json_response({"ok": 0, "message": "参数错误"}, status=400)

    def mymblog(self, request: Request) -> Response:
        user = self.world.weibo_users.get(request.param("uid") or "")
        posts = user.posts if user is not None and user.api == "ajax" else ()
        page = max(1, request.int_param("page", 1))
        page_size = self.world.page_sizes.get(self.prefix.strip("/"), PAGE_SIZE)
        start = (page - 1) * page_size
        listed = posts[start : start + page_size]
        more = start + page_size < len(posts)
        since_id = f"{posts[start + page_size].mid}kp{page + 1}" if more else ""
        data = {
            "since_id": since_id, "list": [self.mblog(request, post, feed=True) for post in listed],
            "status_visible": 0, "bottom_tips_visible": False, "bottom_tips_text": "", "topicList": [], "total": len(posts),
        }
        return json_response({"ok": 1, "data": data})

    def _post(self, request: Request) -> Post | None:
        return self.world.weibo_posts["ajax"].get(request.param("id") or "")

    def show(self, request: Request) -> Response:
        post = self._post(request)
        if post is None:
            return json_response(NOT_FOUND)
        return json_response({"ok": 1, **self.mblog(request, post, feed=False)})

    def longtext(self, request: Request) -> Response:
        post = self._post(request)
        if post is None:
            return json_response(NOT_FOUND)
        return json_response({"ok": 1, "http_code": 200, "data": {"longTextContent": post.long_text or post.text}})

    def mblog(self, request: Request, post: Post, *, feed: bool) -> dict:
        text = post.long_text if (post.long_text and not feed) else post.text
        pictures = post.pictures[:FEED_PICTURE_LIMIT] if feed else post.pictures
        mblog = {
            "visible": dict(VISIBLE), "created_at": created_at(post.created), "id": int(post.mid), "idstr": post.mid,
            "mid": post.mid, "mblogid": post.mblogid,
            "user": {"id": post.uid, "idstr": str(post.uid), "screen_name": post.screen_name, "profile_url": f"/u/{post.uid}"},
            "can_edit": False, "text_raw": text, "text": text, "textLength": len(text), "source": "Simulator",
            "favorited": False, "pic_ids": [picture.pid for picture in pictures], "pic_num": len(post.pictures),
            "isLongText": post.long_text is not None, "mblogtype": 0, **counts(post),
        }
        if pictures:
            mblog["pic_infos"] = {picture.pid: self._pic_info(request, picture) for picture in pictures}
        if post.long_text is not None:
            mblog["continue_tag"] = {"title": "全文", "pic": "", "scheme": f"sinaweibo://detail?mblogid={post.mid}"}
        if post.video is not None:
            mblog["page_info"] = self._video(request, post, post.video)
        if post.repost_of is not None:
            original = post.repost_of
            mblog["retweeted_status"] = tombstone(original) if post.repost_deleted else self.mblog(request, original, feed=feed)
        return mblog

    def _pic_info(self, request: Request, picture: Picture) -> dict:
        info = {}
        for name, segment in PICTURE_SIZES.items():
            if segment in picture.thumbnails:
                file, width, height = picture.thumbnails[segment]
                url = self.cdn.url(request.base_url, file)
            else:  # larger segments serve the original at its own size
                url = f"{request.base_url}/media/weibo/{segment}/{picture.original.path.rsplit('/', 1)[1]}"
                width, height = str(picture.width), str(picture.height)
            info[name] = {"url": url, "width": width, "height": height, "cut_type": 1, "type": None if picture.is_gif else ""}
        kind = "gif" if picture.is_gif else "livephoto" if picture.live_clip else "pic"
        info.update(object_id=f"1042018:{picture.pid[-24:]}", pic_id=picture.pid, photo_tag=0, type=kind, pic_status=1)
        if picture.live_clip is not None:
            info["video"] = self.cdn.url(request.base_url, picture.live_clip)
        return info

    def _video(self, request: Request, post: Post, clip: VideoClip) -> dict:
        urls = {stream.label: self.cdn.url(request.base_url, stream.file, label=stream.label) for stream in clip.streams}
        playback = []
        for stream in reversed(clip.streams):  # best first, like the real list
            description, quality_class = QUALITY_CLASSES[stream.quality_index]
            size = len(self.world.catalog.content(stream.file))
            meta = {
                "label": stream.label, "quality_index": stream.quality_index, "quality_desc": description,
                "quality_label": stream.quality_label, "quality_class": quality_class, "type": 1,
                "quality_group": stream.quality_index + 1, "is_hidden": False,
            }
            play_info = {
                "type": 1, "mime": "video/mp4", "protocol": "general", "label": stream.label, "url": urls[stream.label],
                "bitrate": size * 8 // 1000 // max(1, clip.duration), "video_codecs": "avc1.64001F", "fps": 30,
                "width": stream.width, "height": stream.height, "size": size, "duration": float(clip.duration),
                "audio_codecs": "mp4a.40.2", "audio_sample_rate": 44100, "audio_channels": 2,
            }
            playback.append({"meta": meta, "play_info": play_info})
        title = f"sim video {clip.object_id}"
        media_info = {
            "name": title, "video_title": title, "duration": clip.duration, "video_publish_time": int(post.created.timestamp()),
            "media_id": clip.object_id.split(":")[1], "stream_url": urls["mp4_ld"], "stream_url_hd": urls["mp4_hd"],
            "playback_list": playback,
        }
        return {
            "type": "video", "object_type": "video", "object_id": clip.object_id,
            "page_pic": self.cdn.url(request.base_url, clip.cover),
            "page_url": f"https://video.weibo.com/show?fid={clip.object_id}",
            "media_info": media_info,
        }
