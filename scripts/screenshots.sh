#!/usr/bin/env bash
# Writes PNGs of every page of the console (/ui/) at 1280 and 390 px wide into
# docs/ui/ (or DIR), over the seed's Thursday/Friday story as serve serves it:
# the same fixture the console's browser tests run (adapters/console), driven in
# headless Chromium. docs/ui.md shows them.
#
#   scripts/screenshots.sh [DIR]
#
#   DATABASE_URL       PostgreSQL (default postgres://postgres@127.0.0.1:5432/postgres);
#                      the run works in schemas of its own and drops them
#   OPLEDGER_CHROMIUM  the browser (default: chromium on PATH; Debian: apt-get install -y chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-docs/ui}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
if ! pg_isready -q -d "$DATABASE_URL" -t 2 >/dev/null 2>&1; then
  echo "screenshots.sh: PostgreSQL is not reachable: set DATABASE_URL, or start it (pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start)" >&2
  exit 2
fi
if [ -z "${OPLEDGER_CHROMIUM:-}" ]; then
  for b in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$b" >/dev/null 2>&1; then export OPLEDGER_CHROMIUM=$(command -v "$b"); break; fi
  done
fi
if [ -z "${OPLEDGER_CHROMIUM:-}" ]; then
  echo "screenshots.sh: no browser: install Debian's chromium (apt-get install -y chromium) or set OPLEDGER_CHROMIUM" >&2
  exit 2
fi
OPLEDGER_REQUIRE_BROWSER=1 OPLEDGER_SCREENSHOTS="$dir" \
  go test -count=1 -run '^TestScreenshots$' -v ./adapters/console/ | grep -E 'KB|^(ok|FAIL|---)' >&2
echo "screenshots.sh: wrote $(ls "$dir"/*.png | wc -l) PNGs ($(du -ch "$dir"/*.png | tail -1 | cut -f1)) to $dir" >&2
