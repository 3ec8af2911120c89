"""The simulated platforms' data (accounts, posts, media files), one module per platform.

Pure data built from a seed; answering HTTP requests about it is media_crawler_sim/api/'s job.
"""
