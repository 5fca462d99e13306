#!/usr/bin/env bash
# Measures this machine's PostgreSQL single-row insert rate: pgbench with one
# client for 10 s, each transaction one INSERT into a scratch table, in a
# scratch database that is dropped afterwards. Prints the tps figure, the
# baseline to hold BenchmarkAppend (eventstore/postgres) against: an append
# is one statement and one commit too.
#
#   DATABASE_URL  server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#                 the database named in it is only used to create the scratch one
#   SECONDS_TO_RUN  duration (default 10)
set -euo pipefail

admin_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
duration=${SECONDS_TO_RUN:-10}
redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#; s#(password=)[^ &]*#\1***#g'; }

for tool in psql pgbench; do
  command -v "$tool" >/dev/null || { echo "pgbench-insert.sh: $tool not found (apt-get install postgresql-client)" >&2; exit 2; }
done
if ! pg_isready -q -d "$admin_url" -t 5 >/dev/null 2>&1; then
  echo "pgbench-insert.sh: PostgreSQL not reachable at $(printf '%s' "$admin_url" | redact)" >&2
  exit 2
fi

db="opledger_pgbench_$(date +%Y%m%d%H%M%S)_$$"
script=$(mktemp "${TMPDIR:-/tmp}/pgbench-insert.XXXXXX.sql")
output=$(mktemp "${TMPDIR:-/tmp}/pgbench-insert.XXXXXX.out")
cleanup() {
  rm -f "$script" "$output"
  psql -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

psql -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "CREATE DATABASE $db" >/dev/null
case "$admin_url" in
  postgres://*|postgresql://*)
    bench_url=$(printf '%s' "$admin_url" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$db#") ;;
  *) bench_url="$admin_url dbname=$db" ;; # key=value form: the later dbname wins
esac

psql -q -v ON_ERROR_STOP=1 -d "$bench_url" -c \
  "CREATE TABLE scratch (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now())" >/dev/null
cat >"$script" <<'SQL'
INSERT INTO scratch (payload) VALUES ('{"operation_id":"OP-4471","lease_epoch":1}');
SQL

pgbench -n -c 1 -T "$duration" -f "$script" "$bench_url" >"$output" 2>&1 || {
  cat "$output" | redact >&2
  exit 1
}
tps=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' "$output" | head -n1)
latency=$(sed -nE 's/^latency average = ([0-9.]+ ms).*/\1/p' "$output" | head -n1)
rows=$(psql -qtA -d "$bench_url" -c "SELECT count(*) FROM scratch")
echo "pgbench single-row insert, 1 client, ${duration}s: tps = $tps (latency average $latency, $rows rows)"
