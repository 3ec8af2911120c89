"""m.weibo.cn under /weibo-m: `api/container/getIndex` (since_id paging) and the
`statuses/show?id=` detail. Serves the users configured for the m API (678).

Paging: cards are newest first, PAGE_SIZE posts a page; `cardlistInfo.since_id` is
the mid of the next page's first post (mids grow with time) and is absent on the last
page; a since_id past the end, or an unknown user, answers `ok:0` "这里还没有内容".
The first page also carries a non-9 card (a recommendation group) to be ignored.
A feed mblog lists at most 9 pictures while `pic_num` counts them all.
"""
from __future__ import annotations

from media_crawler_sim.api.weibo_format import NO_CONTENT, VISIBLE, counts, created_at, tombstone
from media_crawler_sim.cdn import CdnRules
from media_crawler_sim.content.weibo import FEED_PICTURE_LIMIT, Picture, Post, User, VideoClip
from media_crawler_sim.exchange import Request, Response, json_response
from media_crawler_sim.world import World

PAGE_SIZE = 5
CONTAINER_PREFIX = "107603"


class WeiboMobileApi:
    prefix = "/weibo-m"

    def __init__(self, world: World, cdn: CdnRules) -> None:
        self.world, self.cdn = world, cdn

    def handle(self, request: Request, subpath: str) -> Response:
        if subpath == "/api/container/getIndex":
            return self.get_index(request)
        if subpath == "/statuses/show":
            return self.show(request)
        return json_response({"ok": 0, "msg": "请求的页面不存在"}, status=404)

    def _user(self, request: Request) -> User | None:
        uid = request.param("value") or (request.param("containerid") or "").removeprefix(CONTAINER_PREFIX)
        user = self.world.weibo_users.get(uid or "")
        return user if user is not None and user.api == "m" else None

    def get_index(self, request: Request) -> Response:
        user = self._user(request)
        if user is None:
            return json_response(NO_CONTENT)
        since_id = request.param("since_id")
        posts = user.posts  # newest first, mids falling (a generated world's is lazy: index, never copy)
        start = 0
        if since_id:
            if not since_id.isdigit():
                return json_response(NO_CONTENT)
            start = _first_at_or_below(posts, int(since_id))
        if start >= len(posts):
            return json_response(NO_CONTENT)
        page_size = self.world.page_sizes.get(self.prefix.strip("/"), PAGE_SIZE)
        page = posts[start : start + page_size]
        cards = [self._card(request, user, post) for post in page]
        if not since_id:
            cards.insert(1, _recommendation_card(user))
        info = {"containerid": CONTAINER_PREFIX + user.uid, "v_p": 42, "show_style": 1, "total": len(user.posts)}
        if start + page_size < len(posts):
            info["since_id"] = int(posts[start + page_size].mid)
        return json_response({"ok": 1, "data": {"cardlistInfo": info, "cards": cards, "scheme": ""}})

    def show(self, request: Request) -> Response:
        post = self.world.weibo_posts["m"].get(request.param("id") or "")
        if post is None:
            return json_response({"ok": 0, "msg": "请求的内容不存在"})
        return json_response({"ok": 1, "data": self.mblog(request, post, feed=False)})

    def _card(self, request: Request, user: User, post: Post) -> dict:
        container = CONTAINER_PREFIX + user.uid
        return {
            "card_type": 9,
            "itemid": f"{container}_-_{post.mid}",
            "scheme": f"https://m.weibo.cn/status/{post.mblogid}?mblogid={post.mblogid}&luicode=10000011&lfid={container}",
            "mblog": self.mblog(request, post, feed=True),
            "show_type": 0,
        }

    def mblog(self, request: Request, post: Post, *, feed: bool) -> dict:
        text = post.text if feed or not post.long_text else post.long_text
        mblog = {
            "visible": dict(VISIBLE), "created_at": created_at(post.created), "id": post.mid, "idstr": post.mid,
            "mid": post.mid, "bid": post.mblogid, "can_edit": False, "text": text, "textLength": len(text),
            "source": "Simulator", "favorited": False, "isLongText": post.long_text is not None,
            "pic_num": len(post.pictures), "pic_types": "", "is_paid": False,
            "user": {
                "id": post.uid, "screen_name": post.screen_name, "profile_url": f"https://m.weibo.cn/u/{post.uid}?uid={post.uid}"
            },
            **counts(post),
        }
        pictures = post.pictures[:FEED_PICTURE_LIMIT] if feed else post.pictures
        if pictures:
            mblog["pics"] = [self._picture(request, picture) for picture in pictures]
            first = mblog["pics"][0]
            mblog.update(thumbnail_pic=first["url"], bmiddle_pic=first["url"], original_pic=first["large"]["url"])
        if post.video is not None:
            mblog["page_info"] = self._video(request, post, post.video)
        if post.repost_of is not None:
            mblog["raw_text"] = post.text
            original = post.repost_of
            mblog["retweeted_status"] = tombstone(original) if post.repost_deleted else self.mblog(request, original, feed=feed)
        return mblog

    def _picture(self, request: Request, picture: Picture) -> dict:
        thumb, thumb_width, thumb_height = picture.thumbnails["orj360"]
        entry = {
            "pid": picture.pid,
            "url": self.cdn.url(request.base_url, thumb),
            "size": "orj360",
            "geo": {"width": thumb_width, "height": thumb_height, "croped": False},
            "large": {
                "size": "large",
                "url": self.cdn.url(request.base_url, picture.original),
                "geo": {"width": str(picture.width), "height": str(picture.height), "croped": False},
            },
        }
        if picture.live_clip is not None:
            entry.update(type="livephoto", videoSrc=self.cdn.url(request.base_url, picture.live_clip))
        return entry

    def _video(self, request: Request, post: Post, clip: VideoClip) -> dict:
        urls = {stream.label: self.cdn.url(request.base_url, stream.file, label=stream.label) for stream in clip.streams}
        title = f"sim video {clip.object_id}"
        return {
            "type": "video", "object_type": 11, "object_id": clip.object_id,
            "page_pic": {"url": self.cdn.url(request.base_url, clip.cover), "width": "640", "height": "360"},
            "page_url": f"https://video.weibo.com/show?fid={clip.object_id}", "page_title": title, "title": title,
            "content1": title, "video_orientation": "horizontal", "play_count": "1万次播放",
            "media_info": {
                "name": title, "duration": clip.duration, "video_publish_time": int(post.created.timestamp()),
                "stream_url": urls["mp4_ld"], "stream_url_hd": urls["mp4_hd"], "mp4_720p_mp4": urls["mp4_720p"],
                "mp4_sd_url": urls["mp4_ld"], "mp4_hd_url": urls["mp4_hd"],
                "h5_url": f"https://video.weibo.com/show?fid={clip.object_id}",
            },
            "urls": {"mp4_720p_mp4": urls["mp4_720p"], "mp4_hd_mp4": urls["mp4_hd"], "mp4_ld_mp4": urls["mp4_ld"]},
        }


def _first_at_or_below(posts, since_id: int) -> int:
    """The index of the first post whose mid is <= since_id (mids fall along the feed)."""
    low, high = 0, len(posts)
    while low < high:
        middle = (low + high) // 2
        if int(posts[middle].mid) <= since_id:
            high = middle
        else:
            low = middle + 1
    return low


def _recommendation_card(user: User) -> dict:
    """A card_type 11 group, as real feeds interleave: carries no mblog."""
    return {
        "card_type": 11, "itemid": f"{CONTAINER_PREFIX}{user.uid}_-_recommend", "show_type": 0,
        "card_group": [{"card_type": 4, "desc": "你可能感兴趣的人", "scheme": "https://m.weibo.cn/p/index?containerid=231051"}],
    }
