#!/usr/bin/env bash
# Debian's prometheus package: promtool (check metrics, check/test rules) and the
# prometheus server the observability tests scrape the exporter with. Idempotent:
# nothing to do when both are installed. The package's service is never started here
# (the tests run their own prometheus on 127.0.0.1 with a temporary config).
# apt may be busy (another install, unattended upgrades): retry while its lock is held.
set -euo pipefail

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  exit 0
fi
for attempt in $(seq 1 30); do
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; } && break
  echo "apt-get is busy or failed (attempt $attempt); retrying in 10 s" >&2
  sleep 10
done
command -v promtool >/dev/null && command -v prometheus >/dev/null || {
  echo "could not install prometheus (promtool, prometheus)" >&2
  exit 1
}
