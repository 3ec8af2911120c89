"""Hostile media: what a lying or broken media host serves, made on demand.

- `builders.py`: real images from Pillow, MP4 box layouts, a PNG decompression bomb;
- `ffmpeg.py`: a real ffmpeg (to make genuine video and, as a decoder the product does not
  ship, to judge what a crawler stored);
- `corpus.py`: the hostile-media corpus, each entry with the verdict a verifying crawler
  must reach (store / refuse / either);
- `server.py`: an HTTP server that serves the corpus, answers whose headers or length lie,
  and URL-list feeds over them.

The tests judge the crawler against it and bench/ measures the crawler on it: both import
it from here, so neither imports the other.
"""
