"""The download engine: streaming .part downloads with resume, classified retries, rate budgets, DASH mux.

Modules are imported by name (`media_crawler.download.fetcher`, `.retry`,
`.ratebudget`, ...): nothing is re-exported here, so a report that only needs
the rate budget does not pay for requests and urllib3 (about 0.3 s).
"""
