"""Bilibili web API under /bilibili: nav (WBI keys), space arc/search (WBI-checked,
pn/ps paging, newest first), view, pagelist, playurl (DASH or legacy durl).

Envelopes are `{code, message, ttl, data}`; errors are HTTP 200 with a non-zero code,
as on the real site. Media URLs are signed at answer time (media_crawler_sim/cdn.py).
"""
from __future__ import annotations

from media_crawler_sim import wbi
from media_crawler_sim.cdn import CdnRules
from media_crawler_sim.content.bilibili import LEGACY_QN, DashTrack, Part, User, Video
from media_crawler_sim.exchange import JSON_TYPE, Request, Response, json_response
from media_crawler_sim.world import World

MAX_PAGE_SIZE = 50
# qn -> (format, description) as playurl's accept_* lists spell them
QUALITY_NAMES = {
    112: ("hdflv2", "高清 1080P+"),
    80: ("flv", "高清 1080P"),
    64: ("flv720", "高清 720P"),
    32: ("flv480", "清晰 480P"),
    16: ("flv360", "流畅 360P"),
}


def envelope(code: int, message: str, data=None, *, with_data: bool = True) -> Response:
    body = {"code": code, "message": message, "ttl": 1}
    if with_data:
        body["data"] = data
    return json_response(body)



class BilibiliApi:
    prefix = "/bilibili"

    def __init__(self, world: World, cdn: CdnRules) -> None:
        self.world, self.cdn = world, cdn
        self.routes = {
            "/x/web-interface/nav": self.nav,
            "/x/space/wbi/arc/search": self.arc_search,
            "/x/web-interface/view": self.view,
            "/x/player/pagelist": self.pagelist,
            "/x/player/wbi/playurl": self.playurl,
            "/x/player/playurl": self.playurl,
        }

    def handle(self, request: Request, subpath: str) -> Response:
        route = self.routes.get(subpath)
        if route is None:
            return envelope(-404, "啥都木有", with_data=False)
        try:
            return route(request)
        except ValueError:  # a non-numeric pn/ps/mid/cid
            return envelope(-400, "请求错误", with_data=False)

    def nav(self, request: Request) -> Response:
        """WBI keys for everyone; code -101 unless a SESSDATA cookie is sent (real behaviour:
        the keys come with the 'not logged in' error, see the nav fixture)."""
        wbi_img = {
            "img_url": f"https://i0.hdslb.com/bfs/wbi/{self.world.wbi_img_key}.png",
            "sub_url": f"https://i0.hdslb.com/bfs/wbi/{self.world.wbi_sub_key}.png",
        }
        if "SESSDATA=" in (request.headers.get("Cookie") or ""):
            return envelope(0, "0", {"isLogin": True, "mid": 1, "uname": "sim-viewer", "wbi_img": wbi_img})
        return envelope(-101, "账号未登录", {"isLogin": False, "wbi_img": wbi_img})

    def arc_search(self, request: Request) -> Response:
        if not wbi.verify(list(request.pairs), self.world.wbi_img_key, self.world.wbi_sub_key):
            return envelope(-403, "访问权限不足", with_data=False)
        user = self.world.bilibili_users.get(request.int_param("mid", 0))
        if user is None:
            return envelope(-404, "啥都木有", with_data=False)
        page_number = max(1, request.int_param("pn", 1))
        page_size = min(MAX_PAGE_SIZE, max(1, request.int_param("ps", 30)))
        start = (page_number - 1) * page_size
        listed = user.videos[start : start + page_size]
        data = {
            "list": {
                "slist": [],
                "tlist": {"21": {"tid": 21, "count": len(user.videos), "name": "日常"}},
                "vlist": [self._vlist_entry(request, user, video) for video in listed],
            },
            "page": {"pn": page_number, "ps": page_size, "count": len(user.videos)},
            "episodic_button": {"text": "播放全部", "uri": f"//www.bilibili.com/medialist/play/{user.mid}?from=space"},
            "is_risk": False,
            "gaia_res_type": 0,
            "gaia_data": None,
        }
        answer = envelope(0, "0", data)
        if user.broken_feed:  # fault source: HTTP 200, body cut in the middle of the JSON
            return Response(200, answer.body[: len(answer.body) // 2], {"Content-Type": JSON_TYPE})
        return answer

    def _vlist_entry(self, request: Request, user: User, video: Video) -> dict:
        minutes, seconds = divmod(video.duration, 60)
        return {
            "comment": 3, "typeid": 21, "play": 1024, "pic": self.cdn.url(request.base_url, video.cover), "subtitle": "",
            "description": video.description, "copyright": "1", "title": video.title, "review": 0, "author": user.name,
            "mid": user.mid, "created": int(video.published.timestamp()), "length": f"{minutes:02d}:{seconds:02d}",
            "video_review": 7, "aid": video.aid, "bvid": video.bvid, "hide_click": False, "is_pay": 0, "is_union_video": 0,
            "is_steins_gate": 0, "is_live_playback": 0, "is_lesson_video": 0, "is_lesson_finished": 0, "lesson_update_info": "",
            "jump_url": "", "meta": None, "is_avoided": 0, "season_id": 0, "attribute": 16512, "is_charging_arc": False,
            "elec_arc_type": 0, "vt": 0, "enable_vt": 0, "vt_display": "", "playback_position": 0, "is_self_view": False,
        }

    def _find(self, request: Request) -> tuple[User, Video] | None:
        return self.world.bilibili_video(request.param("bvid") or request.param("aid") or request.param("avid") or "")

    def view(self, request: Request) -> Response:
        found = self._find(request)
        if found is None:
            return envelope(-404, "啥都木有", with_data=False)
        user, video = found
        first = video.parts[0]
        published = int(video.published.timestamp())
        data = {
            "bvid": video.bvid, "aid": video.aid, "videos": len(video.parts), "tid": 21, "tname": "日常", "copyright": 1,
            "pic": self.cdn.url(request.base_url, video.cover), "title": video.title,
            "pubdate": published, "ctime": published - 120,
            "desc": video.description, "state": 0, "duration": video.duration,
            "rights": {"download": 1, "no_reprint": 1, "autoplay": 1, "is_stein_gate": 0, "is_360": 0},
            "owner": {"mid": user.mid, "name": user.name, "face": ""},
            "stat": {"aid": video.aid, "view": 1024, "danmaku": 7, "reply": 3, "favorite": 5, "coin": 2, "share": 1, "like": 9},
            "dynamic": "", "cid": first.cid, "dimension": {"width": 1920, "height": 1080, "rotate": 0},
            "pages": [dict(self._page_entry(part), ctime=published - 120) for part in video.parts],
            "subtitle": {"allow_submit": False, "list": []}, "is_season_display": False, "need_jump_bv": False,
        }
        return envelope(0, "0", data)

    @staticmethod
    def _page_entry(part: Part) -> dict:
        return {
            "cid": part.cid, "page": part.page, "from": "vupload", "part": part.title, "duration": part.duration,
            "vid": "", "weblink": "", "dimension": {"width": 1920, "height": 1080, "rotate": 0},
        }

    def pagelist(self, request: Request) -> Response:
        found = self._find(request)
        if found is None:
            return envelope(-404, "啥都木有", with_data=False)
        return envelope(0, "0", [self._page_entry(part) for part in found[1].parts])

    def playurl(self, request: Request) -> Response:
        """DASH for DASH videos whatever fnval asks (all qualities, both codecs, no login
        needed); the legacy video answers its single durl file."""
        signed = request.param("w_rid") is not None
        if signed and not wbi.verify(list(request.pairs), self.world.wbi_img_key, self.world.wbi_sub_key):
            return envelope(-403, "访问权限不足", with_data=False)
        found = self._find(request)
        cid = request.int_param("cid", 0)
        part = next((part for part in found[1].parts if part.cid == cid), None) if found else None
        if part is None:
            return envelope(-404, "啥都木有", with_data=False)
        common = {
            "from": "local", "result": "suee", "message": "", "timelength": part.duration * 1000,
            "video_codecid": 7, "seek_param": "start",
        }
        if part.progressive is not None:
            return envelope(0, "0", {**common, **self._durl(request, part)})
        qualities = sorted({track.track_id for track in part.video}, reverse=True)
        data = {
            **common,
            "quality": qualities[0], "format": QUALITY_NAMES[qualities[0]][0], "seek_type": "offset",
            "accept_format": ",".join(QUALITY_NAMES[qn][0] for qn in qualities),
            "accept_description": [QUALITY_NAMES[qn][1] for qn in qualities], "accept_quality": qualities,
            "dash": {
                "duration": part.duration, "minBufferTime": 1.5, "min_buffer_time": 1.5,
                "video": [self._dash_track(request, track, "video/mp4") for track in part.video],
                "audio": [self._dash_track(request, track, "audio/mp4") for track in part.audio],
                "dolby": {"type": 0, "audio": None}, "flac": None,
            },
            "support_formats": [
                {"quality": qn, "format": QUALITY_NAMES[qn][0], "new_description": QUALITY_NAMES[qn][1],
                 "display_desc": QUALITY_NAMES[qn][1].split()[-1], "superscript": "",
                 "codecs": [track.codecs for track in part.video if track.track_id == qn]}
                for qn in qualities
            ],
            "high_format": None, "last_play_time": 0, "last_play_cid": 0, "view_info": None,
            "play_conf": {"is_new_description": False}, "cur_language": "",
        }
        return envelope(0, "0", data)

    def _dash_track(self, request: Request, track: DashTrack, mime: str) -> dict:
        url = self.cdn.url(request.base_url, track.file)
        backups = [self.cdn.url(request.base_url, track.file, mirror=mirror) for mirror in (1, 2)]
        is_video = mime.startswith("video")
        init, index = track.segment_base
        return {
            "id": track.track_id, "baseUrl": url, "base_url": url, "backupUrl": backups, "backup_url": backups,
            "bandwidth": track.bandwidth, "mimeType": mime, "mime_type": mime, "codecs": track.codecs,
            "width": track.width, "height": track.height, "sar": "1:1" if is_video else "",
            "frameRate": "30.000" if is_video else "", "frame_rate": "30.000" if is_video else "",
            "startWithSap": 1 if is_video else 0, "start_with_sap": 1 if is_video else 0,
            "SegmentBase": {"Initialization": init, "indexRange": index},
            "segment_base": {"initialization": init, "index_range": index},
            "codecid": track.codecid,
        }

    def _durl(self, request: Request, part: Part) -> dict:
        file = part.progressive
        description = QUALITY_NAMES[LEGACY_QN][1]
        return {
            "quality": LEGACY_QN, "format": "mp4720", "seek_type": "second", "accept_format": "mp4720",
            "accept_description": [description], "accept_quality": [LEGACY_QN],
            "durl": [{
                "order": 1, "length": part.duration * 1000, "size": len(self.world.catalog.content(file)),
                "ahead": "", "vhead": "",
                "url": self.cdn.url(request.base_url, file),
                "backup_url": [self.cdn.url(request.base_url, file, mirror=mirror) for mirror in (1, 2)],
            }],
            "support_formats": [{
                "quality": LEGACY_QN, "format": "mp4720", "new_description": description,
                "display_desc": "720P", "superscript": "", "codecs": None,
            }],
            "high_format": None, "last_play_time": 0, "last_play_cid": 0,
        }
