"""The project's benchmarks, one package with one entry point: `python -m bench NAME [args]` from the repo root.

Two harnesses and the scripts that answered one question each (bench/__main__.py
lists them): the peer download benchmark (`make bench`: bench/run.sh with the
shared harness, `floor` and `report`), the scale rows of issue 16 (`scale` with
scale_figures, scale_postgres, `scale_report`), and single measurements. What
they measure with (timing, CPU and load of the host, the simulator's request
rate, a local HTTP server) is in bench/instruments.py. Ledgers are filled and
read only through media_crawler.store.
"""
