"""Facebook's x-app-usage headers slow the shared rate budget before the platform refuses."""
from media_crawler.config import config_from_dict
from media_crawler.pipeline.runtime import Runtime
from media_crawler.platforms.base import ApiResponse


def test_high_app_usage_lowers_the_facebook_rate(crawl_home):
    runtime = Runtime.from_config(config_from_dict({"sources": []}))
    before = runtime.budget.current_rate("facebook")
    calm = ApiResponse(200, {"x-app-usage": '{"call_count":10,"total_cputime":5,"total_time":5}'}, "{}", "u")
    runtime._heed_usage_headers("facebook", calm)
    assert runtime.budget.current_rate("facebook") == before
    busy = ApiResponse(200, {"x-app-usage": '{"call_count":92,"total_cputime":40,"total_time":60}'}, "{}", "u")
    runtime._heed_usage_headers("facebook", busy)
    assert runtime.budget.current_rate("facebook") < before
    assert runtime.budget.current_rate("bilibili") is not None
