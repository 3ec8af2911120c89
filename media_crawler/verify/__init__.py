"""Verification: magic bytes, HTML-instead-of-media, Pillow decode with a bomb guard, MP4 box walk."""
from media_crawler.verify.verify import VerifyResult, verify_file

__all__ = ["VerifyResult", "verify_file"]
