#!/usr/bin/env bash
# Projector catch-up throughput on a log of 1,000,000 realistic events, beside
# two ceilings read from the same rows in the same run: a plain
# `COPY (SELECT ... FROM events ORDER BY transaction_id, global_position) TO
# STDOUT`, and ReadAll through the eventstore port; and beside a floor: the
# rows the catch-up left, written into fresh read models at once (one binary
# COPY per table). Each round runs all four (the projector into a fresh
# schema), with the CPU each took; the medians and the ratios are printed at
# the end. It runs BenchmarkCatchUp (projections/bench_test.go), which
# `go test ./...` skips unless OPLEDGER_BENCH_EVENTS is set.
#
# The log: a template of 300 operations written by the command handler
# (completions, duplicates, replays, Unknowns reconciled or escalated, lapsed
# leases and late outcomes, retries, denials, refused writes, unattributed
# evidence), replicated under new identifiers by INSERT ... SELECT
# generate_series (about 100,000 events per transaction).
#
#   DATABASE_URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#                 the database named in it is only used to create a scratch one
#   EVENTS        log size (default 1000000)
#   ROUNDS        rounds to take medians over (default 5)
#   BATCH         projector batch size (default: the projector's, 5000)
set -euo pipefail
cd "$(dirname "$0")/.."

admin_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#; s#(password=)[^ &]*#\1***#g'; }

if ! pg_isready -q -d "$admin_url" -t 5 >/dev/null 2>&1; then
  echo "bench-projections.sh: PostgreSQL not reachable at $(printf '%s' "$admin_url" | redact)" >&2
  exit 2
fi

db="opledger_bench_projections_$(date +%Y%m%d%H%M%S)_$$"
psql -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "CREATE DATABASE $db" >/dev/null
cleanup() { psql -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; }
trap cleanup EXIT

export DATABASE_URL=$(printf '%s' "$admin_url" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$db#")
export OPLEDGER_BENCH_EVENTS=${EVENTS:-1000000}
export OPLEDGER_BENCH_ROUNDS=${ROUNDS:-5}
export OPLEDGER_BENCH_BATCH=${BATCH:-0}
echo "bench-projections.sh: $OPLEDGER_BENCH_EVENTS events, $OPLEDGER_BENCH_ROUNDS rounds, database $db on $(printf '%s' "$DATABASE_URL" | redact)" >&2
echo "bench-projections.sh: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

go test -run '^$' -bench '^BenchmarkCatchUp$' -benchtime 1x -timeout 180m -v ./projections/ 2>&1 |
  grep -E 'bench_test.go|^BenchmarkCatchUp|^ok|FAIL|panic'
