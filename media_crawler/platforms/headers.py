"""What adapters present to platforms: browser-like User-Agents and the
credentials named in settings (environment variable names, never values)."""
from __future__ import annotations


from media_crawler.environment import environment_value
from media_crawler.platform_spec import PlatformSettings

# Bilibili and Weibo answer non-browser agents with risk-control pages.
BROWSER_USER_AGENT = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36"
)
MOBILE_USER_AGENT = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Mobile/15E148 Safari/604.1"
)


def credential(settings: PlatformSettings, name: str, default_env: str) -> str | None:
    """The secret stored in the environment variable that `credential_env[name]`
    names (default `default_env`), or None when it is unset or empty."""
    env_name = settings.credential_env.get(name, default_env)
    return environment_value(env_name)
