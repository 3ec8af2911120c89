"""`media-crawler export --format wacz`: the archive as WARC records packed in a WACZ.

`warc.py` writes records (each its own gzip member), `surt.py` makes the index's URL
keys, `sorted_lines.py` sorts the index and page lines on disk (memory flat in the item
count), `records.py` turns ledger rows and blobs into records, `wacz.py` packs the file.
"""
