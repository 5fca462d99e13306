#!/usr/bin/env bash
# Benchmarks `audit verify` (domain/audit.Verify) over a large log on
# PostgreSQL, beside its ceiling: a plain
#   COPY (SELECT ... FROM <schema>.events ORDER BY transaction_id, global_position) TO STDOUT
# of the same rows, in the same order, in the same run. It
#   1. seeds a scratch schema with OPLEDGER_BENCH_EVENTS events (default
#      1,000,000): the audit tests' story (seven operations and an evidence
#      event, written by the real command handler, sweeper and reconciler)
#      copied under new operation ids by INSERT ... SELECT, 1,000 copies
#      interleaved per transaction;
#   2. alternates COPY and Verify OPLEDGER_BENCH_ROUNDS times (default 5) and
#      prints each round, the medians, the verify/copy ratio and Verify's
#      heap (sampled with runtime/metrics);
#   3. runs each once more under /usr/bin/time -v for its maximum RSS;
#   4. drops the schema (keep it with OPLEDGER_BENCH_KEEP=1, reuse a kept one
#      with OPLEDGER_BENCH_SCHEMA=<name> OPLEDGER_BENCH_SKIP_SEED=1).
#
#   DATABASE_URL          server (default postgres://postgres@127.0.0.1:5432/postgres)
#   OPLEDGER_BENCH_EVENTS  events to seed (default 1000000)
#   OPLEDGER_BENCH_ROUNDS  rounds (default 5)
#   OPLEDGER_BENCH_PAGE    Verify's page size (default 1000)
#
# The driver is TestBenchAudit in domain/audit/bench_test.go, which skips
# itself unless OPLEDGER_BENCH_AUDIT names a mode, so `go test ./...` never
# runs it. Timings are wall clock on a machine shared with the server: run it
# on a quiet machine, and read the ratio, not the absolute figures.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export OPLEDGER_BENCH_SCHEMA=${OPLEDGER_BENCH_SCHEMA:-opledger_bench_audit_$$}
export OPLEDGER_BENCH_EVENTS=${OPLEDGER_BENCH_EVENTS:-1000000}
export OPLEDGER_BENCH_ROUNDS=${OPLEDGER_BENCH_ROUNDS:-5}
export OPLEDGER_BENCH_PAGE=${OPLEDGER_BENCH_PAGE:-1000}
redacted=$(printf '%s' "$DATABASE_URL" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#; s#(password=)[^ &]*#\1***#g')

if ! pg_isready -q -d "$DATABASE_URL" -t 5 >/dev/null 2>&1; then
  echo "bench-audit.sh: PostgreSQL not reachable at $redacted" >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "bench-audit.sh: /usr/bin/time not found (apt-get install time)" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-audit.XXXXXX")
bin="$work/audit.test"
cleanup() {
  if [ "${OPLEDGER_BENCH_KEEP:-0}" != 1 ] && [ -x "$bin" ]; then
    OPLEDGER_BENCH_AUDIT=drop "$bin" -test.run '^TestBenchAudit$' >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

run() { OPLEDGER_BENCH_AUDIT=$1 "$bin" -test.run '^TestBenchAudit$' -test.timeout 60m; }

echo "bench-audit.sh: schema $OPLEDGER_BENCH_SCHEMA on $redacted, $(nproc) CPUs" >&2
go test -c -o "$bin" ./domain/audit

if [ "${OPLEDGER_BENCH_SKIP_SEED:-0}" != 1 ]; then
  run seed | grep '^seed:'
fi
run measure | grep -v -e '^PASS$' -e '^ok '

rss() { # mode: prints the maximum resident set size in MiB
  OPLEDGER_BENCH_AUDIT=$1 /usr/bin/time -v "$bin" -test.run '^TestBenchAudit$' -test.timeout 60m 2>"$work/time.$1" >"$work/out.$1"
  awk '/Maximum resident set size/ { printf "%.1f", $NF / 1024 }' "$work/time.$1"
}
verify_rss=$(rss verify-once)
copy_rss=$(rss copy-once)
echo "max RSS: verify ${verify_rss} MiB ($(grep '^verify-once' "$work/out.verify-once")), copy client ${copy_rss} MiB"
