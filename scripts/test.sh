#!/usr/bin/env bash
# The test command: makes sure PostgreSQL is reachable (starting the system's
# cluster if it is down), creates a fresh database for this run, runs
# `go test -race ./...` against it, and drops the database afterwards; then
# the simulator's sweep (2000 schedules), its planted bugs,
# scripts/chaos.sh --short on real processes, and scripts/failover.sh --short
# (the database machine lost, synchronous and asynchronous standby; skipped
# with GO_TEST_FLAGS).
#
#   DATABASE_URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#                 the database named in it is only used to create the run's own
#   GO_TEST_FLAGS extra flags for go test (e.g. "-run Claim -v")
#   OPLEDGER_CHROMIUM  the browser for the console's tests (default: chromium on PATH,
#                 installed with apt-get when missing and apt-get can be used)
#   OPLEDGER_NO_BROWSER_INSTALL=1  never install one
#   OPLEDGER_NPM_TOOLS  where npm's tools are kept between runs (default
#                 ~/.cache/opledger/npm-tools): @redocly/cli and mermaid
#   python3       the Python client's tests need it (installed with apt-get when missing)
#   OPLEDGER_PROMTOOL  promtool for the alert rules' checks (default: promtool on PATH, else
#                 the one extracted from Debian's prometheus package into ~/.cache/opledger/tools)
#   patroni, etcd scripts/failover.sh runs its cluster under them (Debian's patroni and
#                 etcd-server, installed with apt-get when missing; without them: plain
#                 streaming replication); OPLEDGER_NO_HA_INSTALL=1 never installs them
set -euo pipefail
cd "$(dirname "$0")/.."

admin_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
redacted=$(printf '%s' "$admin_url" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#')

reachable() { pg_isready -q -d "$admin_url" -t 2 >/dev/null 2>&1; }

if ! reachable; then
  echo "test.sh: PostgreSQL not reachable at $redacted; trying the system cluster" >&2
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for v in $(ls /etc/postgresql); do
      pg_ctlcluster --skip-systemctl-redirect "$v" main start >&2 || true
    done
  fi
  for _ in $(seq 1 30); do reachable && break; sleep 1; done
  if ! reachable; then
    echo "test.sh: PostgreSQL is still not reachable at $redacted." >&2
    echo "         Set DATABASE_URL, or start it: pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start" >&2
    exit 2
  fi
fi

db="opledger_test_$(date +%Y%m%d%H%M%S)_$$"
psql -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "CREATE DATABASE $db" >/dev/null
cleanup() { psql -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# Same server, the run's own database.
export DATABASE_URL=$(printf '%s' "$admin_url" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$db#")
echo "test.sh: database $db on $(printf '%s' "$DATABASE_URL" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#')" >&2

# The console's tests drive a real browser: headless Chromium (Debian's
# package). Find it, else install it, else say loudly that they are skipped.
find_browser() {
  local b
  for b in "${OPLEDGER_CHROMIUM:-}" chromium chromium-browser google-chrome google-chrome-stable; do
    if [ -n "$b" ] && command -v "$b" >/dev/null 2>&1; then command -v "$b"; return 0; fi
  done
  return 1
}
if ! find_browser >/dev/null && [ "${OPLEDGER_NO_BROWSER_INSTALL:-}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
  as_root=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"; else as_root="none"; fi
  fi
  if [ "$as_root" != none ]; then
    echo "test.sh: no browser found; installing Debian's chromium for the console's browser tests (apt-get)" >&2
    { $as_root apt-get update -qq && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >&2 ||
      echo "test.sh: apt-get could not install chromium" >&2
  fi
fi
if browser=$(find_browser); then
  echo "test.sh: the console's browser tests use $browser" >&2
  export OPLEDGER_CHROMIUM=$browser OPLEDGER_REQUIRE_BROWSER=1
else
  no_browser() {
    printf '%s\n' "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    printf '%s\n' "!!! NO BROWSER: the console's browser tests (adapters/console) are SKIPPED."
    printf '%s\n' "!!! Install Debian's chromium (apt-get install -y chromium) or set OPLEDGER_CHROMIUM."
    printf '%s\n' "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  } >&2
  no_browser
  trap 'cleanup; no_browser' EXIT # said again at the end, where it is seen
fi

# Two tools from npm, pinned: @redocly/cli lints docs/openapi.yaml
# (adapters/httpapi), and Mermaid's package (its mermaid.min.js alone, by
# npm pack, no dependencies) renders `audit replay --format mermaid` in the
# browser (cmd/opledger). Kept in $OPLEDGER_NPM_TOOLS between runs; on a fresh
# machine the two downloads take about 15 s (each bounded to 5 minutes).
# Without npm their tests are skipped, loudly.
npm_tools=${OPLEDGER_NPM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/opledger/npm-tools}
redocly_version=2.77.0 mermaid_version=11.17.2
if command -v npm >/dev/null 2>&1; then
  redocly_dir=$npm_tools/redocly-$redocly_version mermaid_dir=$npm_tools/mermaid-$mermaid_version
  if [ ! -x "$redocly_dir/node_modules/.bin/redocly" ]; then
    echo "test.sh: installing @redocly/cli@$redocly_version with npm into $redocly_dir" >&2
    mkdir -p "$redocly_dir"
    timeout 300 npm install --no-audit --no-fund --loglevel=error --prefix "$redocly_dir" "@redocly/cli@$redocly_version" >&2 ||
      echo "test.sh: npm could not install @redocly/cli" >&2
  fi
  if [ ! -f "$mermaid_dir/package/dist/mermaid.min.js" ]; then
    echo "test.sh: fetching mermaid@$mermaid_version (npm pack) into $mermaid_dir" >&2
    mkdir -p "$mermaid_dir"
    { timeout 300 npm pack --silent --pack-destination "$mermaid_dir" "mermaid@$mermaid_version" >/dev/null &&
      tar -xzf "$mermaid_dir/mermaid-$mermaid_version.tgz" -C "$mermaid_dir" package/dist/mermaid.min.js &&
      rm -f "$mermaid_dir/mermaid-$mermaid_version.tgz"; } >&2 ||
      echo "test.sh: npm could not fetch mermaid" >&2
  fi
  export OPLEDGER_REDOCLY=$redocly_dir/node_modules/.bin/redocly OPLEDGER_MERMAID_JS=$mermaid_dir/package/dist/mermaid.min.js
  export OPLEDGER_REQUIRE_NPM_TOOLS=1
else
  no_npm() {
    printf '%s\n' "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    printf '%s\n' "!!! NO NPM: the OpenAPI lint (redocly) and the Mermaid rendering test are SKIPPED."
    printf '%s\n' "!!! Install npm (apt-get install -y npm) to run them."
    printf '%s\n' "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  } >&2
  no_npm
  trap 'cleanup; no_npm; [ -n "${browser:-}" ] || no_browser' EXIT
fi
# The Python client's tests (clients/python: unittest, standard library only)
# run from cmd/opledger's tests against real serve and provider-sim
# processes, and need python3 (3.9 or later): Debian's python3 is
# installed with apt-get when it is missing and apt-get can be used.
if ! command -v python3 >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo_n=""
  [ "$(id -u)" = 0 ] || sudo_n="sudo -n"
  echo "test.sh: no python3; installing Debian's python3 for the Python client's tests (apt-get)" >&2
  { $sudo_n apt-get update -qq && $sudo_n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3; } >&2 ||
    echo "test.sh: apt-get could not install python3" >&2
fi
export OPLEDGER_REQUIRE_PYTHON=1 # a missing python3 fails those tests, never skips them
# scripts/failover.sh (at the end) runs its primary and standby under
# Patroni with etcd, as docs/operations.md recommends: Debian's patroni and
# etcd-server (about 40 MB with their Python modules), installed with
# apt-get when missing and apt-get can be used. Without them it runs plain
# streaming replication promoted with pg_ctl, and says which ran.
if ! { command -v patroni && command -v etcd; } >/dev/null 2>&1 && [ "${OPLEDGER_NO_HA_INSTALL:-}" != 1 ] &&
  command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
  sudo_n=""
  [ "$(id -u)" = 0 ] || sudo_n="sudo -n"
  echo "test.sh: no patroni/etcd; installing Debian's patroni and etcd-server for scripts/failover.sh (apt-get)" >&2
  { $sudo_n apt-get update -qq && $sudo_n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patroni etcd-server; } >&2 ||
    echo "test.sh: apt-get could not install patroni and etcd-server; scripts/failover.sh runs plain streaming replication" >&2
fi

# promtool checks docs/monitoring/alerts.yml and runs its unit tests
# (cmd/opledger's TestAlertRulesPassPromtool). Debian ships it only inside the
# prometheus package (a server with a web UI, 96 MB installed): only the
# promtool binary is taken from it, apt-get download + dpkg-deb, no service
# installed or started, kept in ~/.cache/opledger/tools between runs (a 19 MB
# download, about 15 s on a fresh machine, bounded to 5 minutes).
find_promtool() {
  local p
  for p in "${OPLEDGER_PROMTOOL:-}" promtool "$tools_dir/promtool"; do
    if [ -n "$p" ] && command -v "$p" >/dev/null 2>&1; then command -v "$p"; return 0; fi
  done
  return 1
}
tools_dir=${XDG_CACHE_HOME:-$HOME/.cache}/opledger/tools
if ! find_promtool >/dev/null && command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
  echo "test.sh: no promtool; extracting it from Debian's prometheus package into $tools_dir (apt-get download)" >&2
  promtool_tmp=$(mktemp -d)
  { [ "$(id -u)" != 0 ] || apt-get update -qq; } >&2 || true
  if (cd "$promtool_tmp" && timeout 300 apt-get download -qq prometheus >/dev/null 2>&1) &&
    mkdir -p "$tools_dir" &&
    dpkg-deb --fsys-tarfile "$promtool_tmp"/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$tools_dir/promtool.part" &&
    chmod +x "$tools_dir/promtool.part"; then
    mv "$tools_dir/promtool.part" "$tools_dir/promtool"
  else
    echo "test.sh: could not extract promtool from Debian's prometheus package" >&2
  fi
  rm -rf "$promtool_tmp"
fi
if promtool_path=$(find_promtool); then
  echo "test.sh: the alert rules' checks use $promtool_path" >&2
  export OPLEDGER_PROMTOOL=$promtool_path OPLEDGER_REQUIRE_PROMTOOL=1
else
  echo "test.sh: NO PROMTOOL: the alert rules' promtool checks are SKIPPED" >&2
fi

go vet ./...
# shellcheck disable=SC2086
go test -race -count=1 -timeout 15m ${GO_TEST_FLAGS:-} ./...

# The simulator (docs/simulation.md). Its CI sweep runs without the race
# detector, which would make 2000 schedules take several minutes (the run
# above sweeps 150 under it, for races): the seed is printed, and
# OPLEDGER_SIM_SEED=... reproduces the sweep. Then its teeth: each known bug,
# planted alone (a -tags simbugs build), is caught. Then the same checks on
# real processes, short (under 2 minutes), and the loss of the database
# machine with a synchronous and an asynchronous standby (docs/operations.md,
# "High availability"; about 3 minutes).
if [ -z "${GO_TEST_FLAGS:-}" ]; then
  OPLEDGER_SIM_SCHEDULES=${OPLEDGER_SIM_SCHEDULES:-2000} \
    go test -count=1 -timeout 10m -run '^TestSweep$' -v ./adapters/simworld/ | grep -E '^(--- |ok|FAIL|PASS|panic| +sweep_test)'
  go test -tags simbugs -count=1 -timeout 10m -run '^(TestPlantedBugs|TestSimCommandReportsAViolation)$' ./adapters/simworld/ ./cmd/opledger/
  scripts/chaos.sh --short
  scripts/failover.sh --short
fi
