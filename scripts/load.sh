#!/usr/bin/env bash
# Load run: starts provider-sim and serve on loopback against a fresh
# database, runs scripts/loadgen (50 clients, 30 s by default), prints claims
# per second and latency percentiles, and cleans up. Not part of the tests.
#
#   DATABASE_URL  server (default postgres://postgres@127.0.0.1:5432/postgres)
#   CLIENTS, DURATION  (defaults 50, 30s)
set -euo pipefail
cd "$(dirname "$0")/.."
admin_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
db="opledger_load_$$"
tmp=$(mktemp -d)
psql -q -d "$admin_url" -c "CREATE DATABASE $db" >/dev/null
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -q -d "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export DATABASE_URL=$(printf '%s' "$admin_url" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$db#")
go build -o "$tmp/opledger" ./cmd/opledger
go build -o "$tmp/loadgen" ./scripts/loadgen
printf 'agent load-agent-token-0123456789 load\nworker load-worker-token-0123456789 load\n' > "$tmp/tokens"
"$tmp/opledger" migrate >/dev/null
OPLEDGER_LOG_LEVEL=warn "$tmp/opledger" provider-sim --listen 127.0.0.1:18181 2>"$tmp/sim.log" & pids+=($!)
OPLEDGER_LOG_LEVEL=warn "$tmp/opledger" serve --dev --rate-limit 0 --tokens "$tmp/tokens" --listen 127.0.0.1:18180 \
  --provider-url http://127.0.0.1:18181 2>"$tmp/serve.log" & pids+=($!)
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18180/readyz >/dev/null && break; sleep 0.1; done
"$tmp/loadgen" --api http://127.0.0.1:18180 --clients "${CLIENTS:-50}" --duration "${DURATION:-30s}" \
  --agent-token load-agent-token-0123456789 --worker-token load-worker-token-0123456789
