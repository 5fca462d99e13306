#!/usr/bin/env bash
# One benchmark command: every figure of docs/scaling.md beside a baseline
# measured in the same run on the same server, interleaved (opledger,
# baseline, opledger, baseline, ...), medians of at least 5 samples. Prints
# one JSON line per figure on stdout,
#
#   {"figure":"append_1ev_c16","value":…,"unit":"ops/s","baseline":"pgbench 1-row insert c16","baseline_value":…,"ratio":…,"goal":"ratio >= 1.0"}
#
# progress on stderr, and writes BENCHMARKS.md (machine, date, commands,
# the table). Not run by CI: it is slow, and its figures depend on the
# machine. Goals are goals, never assertions.
#
#   scripts/bench.sh [--quick] [--only PREFIX[,PREFIX]] [--rounds N] [--out FILE]
#
#   --quick    small sizes and 1 s samples: about 5 minutes (full: about 13 on
#              the 2-core development machine, within 20)
#   --only     run only the figures whose names start with one of PREFIX
#   --rounds   samples per figure and per baseline (default 5, at least 5)
#   --out      the report (default BENCHMARKS.md at the repository's root;
#              --out '' writes none)
#
#   DATABASE_URL  server (default postgres://postgres@127.0.0.1:5432/postgres);
#                 the database it names is only used to create the bench's
#                 own (opledger_bench_<time>_<pid>), dropped at the end
#
# Needs psql and pgbench (apt-get install postgresql-client) and Go; Kafka
# figures use an in-process broker (kfake), the provider is the project's
# simulator with no latency (a provider-sim process started fresh for each
# sample).
#
# The peers, installed at bench time from their registries (nothing of
# theirs is kept in the repository):
#   - Message DB (npm @eventide/message-db, MESSAGE_DB_VERSION, default
#     1.3.1) into a database of the run's own (<db>_mdb, dropped at the
#     end): its schema, table, functions and indexes (not its role, views
#     or grants, which are cluster-wide); needs npm. Without npm the
#     *_vs_messagedb figures say so and the rest runs.
#   - River (scripts/bench/river, a Go module of its own: go build fetches
#     River from the module proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

admin_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
redact() { sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#; s#(password=)[^ &]*#\1***#g'; }

out="$root/BENCHMARKS.md"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --quick|--only|--only=*|--rounds|--rounds=*|--cpuprofile|--cpuprofile=*)
      args+=("$1")
      if [ "$1" = --only ] || [ "$1" = --rounds ] || [ "$1" = --cpuprofile ]; then args+=("$2"); shift; fi
      shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

for tool in psql pgbench pg_isready go; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool not found (psql, pgbench: apt-get install postgresql-client)" >&2; exit 2; }
done
if ! pg_isready -q -d "$admin_url" -t 5 >/dev/null 2>&1; then
  echo "bench.sh: PostgreSQL not reachable at $(printf '%s' "$admin_url" | redact)" >&2
  exit 2
fi

db="opledger_bench_$(date +%Y%m%d%H%M%S)_$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/opledger-bench.XXXXXX")
cleanup() {
  rm -rf "$work"
  psql -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  psql -q -d "$admin_url" -c "DROP DATABASE IF EXISTS ${db}_mdb WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
psql -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "CREATE DATABASE $db" >/dev/null
url_of() { # the admin URL naming database $1
  case "$admin_url" in
    postgres://*|postgresql://*) printf '%s' "$admin_url" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$1#" ;;
    *) printf '%s dbname=%s' "$admin_url" "$1" ;; # key=value form: the later dbname wins
  esac
}
bench_url=$(url_of "$db")

# Message DB: npm's package, its SQL applied in its install.sh's order.
mdb_url=
mdb_version=${MESSAGE_DB_VERSION:-1.3.1}
if command -v npm >/dev/null; then
  echo "bench.sh: installing Message DB $mdb_version from npm" >&2
  if timeout 300 npm install --silent --no-audit --no-fund --ignore-scripts --prefix "$work/mdb" "@eventide/message-db@$mdb_version" >&2; then
    mdb="$work/mdb/node_modules/@eventide/message-db/database"
    psql -q -v ON_ERROR_STOP=1 -d "$admin_url" -c "CREATE DATABASE ${db}_mdb" >/dev/null
    mdb_url=$(url_of "${db}_mdb")
    files=(schema/message-store.sql extensions/pgcrypto.sql tables/messages.sql types/message.sql)
    for f in message-store-version hash-64 acquire-lock category is-category id cardinal-id stream-version write-message \
      get-stream-messages get-category-messages get-last-stream-message; do files+=("functions/$f.sql"); done
    files+=(indexes/messages-id.sql indexes/messages-stream.sql indexes/messages-category.sql)
    for f in "${files[@]}"; do
      PGOPTIONS='-c client_min_messages=warning -c search_path=message_store,public' \
        psql -q -v ON_ERROR_STOP=1 -d "$mdb_url" -f "$mdb/$f" >/dev/null
    done
    psql -q -v ON_ERROR_STOP=1 -d "$mdb_url" -c "ALTER DATABASE ${db}_mdb SET search_path = message_store, public" >/dev/null
  else
    echo "bench.sh: npm could not install @eventide/message-db@$mdb_version: the Message DB figures will say so" >&2
  fi
else
  echo "bench.sh: npm not found: the Message DB figures will say so" >&2
fi

echo "bench.sh: building (database $db on $(printf '%s' "$bench_url" | redact))" >&2
go build -o "$work/bench" ./scripts/bench
go build -o "$work/opledger" ./cmd/opledger
go build -o "$work/loadgen" ./scripts/loadgen
(cd scripts/bench/river && go build -o "$work/river-peer" .)

DATABASE_URL=$bench_url "$work/bench" --bin "$work" --out "$out" --message-db-url "$mdb_url" \
  --command "scripts/bench.sh ${args[*]:-}" "${args[@]}"
