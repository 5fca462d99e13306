#!/usr/bin/env bash
# The simulator's checks on real processes. Starts a private PostgreSQL
# cluster (initdb in a temporary directory, its own port; as the postgres
# user when run as root), provider-sim, serve and several `opledger worker`s
# on it, drives refunds through the HTTP API, and meanwhile SIGKILLs and
# SIGSTOPs workers at random, arms the provider's faults, and restarts the
# cluster (fast and immediate). Then it lets everything settle and checks:
#
#   - the provider's ledger: at most one refund created per operation;
#   - opledger audit verify: every invariant over the whole log;
#   - opledger audit provider-diff: the provider's refunds and the ledger's
#     completions agree (a refund may lack a completion only while its
#     operation is Escalated, waiting for a person);
#   - every operation is terminal (Completed, NotApplied, Denied) or Escalated.
#
#   scripts/chaos.sh [--short] [--seed N] [--chaos SECONDS] [--workers N] [--ops N] [--keep]
#
#   --short    the CI mode: about 20 s of chaos, all done within 2 minutes
#   --seed N   the seed of the run's choices (CHAOS_SEED; default random, printed): which
#              process gets which signal when, which fault is armed, which profile. The
#              processes' own timing is not the seed's: a seed reproduces the choices, not
#              the interleaving (the in-process simulator, opledger sim, reproduces both).
#   --keep     keep the run's directory (logs, data) even when it passes
#
# To see the checks catch a planted bug on real processes (a build with -tags simbugs; see
# docs/simulation.md): CHAOS_BUILD_TAGS=simbugs OPLEDGER_SIMBUG=fresh-key-per-resend scripts/chaos.sh
#
# It prints one JSON line and exits 0 when every check holds, 1 with the failing checks (and
# the directory kept) otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

short=false keep=false
seed=${CHAOS_SEED:-}
chaos_s=90 workers=3 ops=40
while [ $# -gt 0 ]; do
  case $1 in
    --short) short=true; chaos_s=20; ops=16 ;;
    --seed) seed=$2; shift ;;
    --chaos) chaos_s=$2; shift ;;
    --workers) workers=$2; shift ;;
    --ops) ops=$2; shift ;;
    --keep) keep=true ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "chaos.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$seed" ] || seed=$(( (RANDOM << 15 | RANDOM) ))
RANDOM=$seed # every choice below draws from bash's generator, seeded
started=$(date +%s)

tmp=$(mktemp -d /tmp/opledger-chaos.XXXXXX)
chmod 755 "$tmp"
log() { printf '%s %5ss  %s\n' "chaos" "$(( $(date +%s) - started ))" "$*" | tee -a "$tmp/chaos.log" >&2; }
log "seed $seed, $chaos_s s of chaos, $workers workers, $ops operations, directory $tmp"

# Bounded waits: every poll below gives up after its bound.
wait_for() { # what seconds command...
  local what=$1 bound=$2; shift 2
  local end=$(( $(date +%s) + bound ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge $end ]; then log "gave up waiting for $what after ${bound}s"; return 1; fi
    sleep 0.2
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# --- PostgreSQL: a private cluster from the system's binaries -------------
pgbin=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then pgbin=$d; break; fi
done
if [ -z "$pgbin" ] && command -v initdb >/dev/null; then pgbin=$(dirname "$(command -v initdb)"); fi
[ -n "$pgbin" ] || { echo "chaos.sh: no initdb/pg_ctl (looked in /usr/lib/postgresql/*/bin and PATH)" >&2; exit 2; }
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pgdata=$tmp/pg
mkdir -p "$pgdata"
[ "$(id -u)" = 0 ] && chown postgres "$pgdata" "$tmp"
pgport=$(free_port)
as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --no-sync >"$tmp/initdb.log" 2>&1
pg_ctl() { as_pg "$pgbin/pg_ctl" -D "$pgdata" "$@"; }
pgopts="-p $pgport -k $tmp -c listen_addresses=127.0.0.1 -c fsync=off"
pg_ctl -o "$pgopts" -l "$tmp/postgres.log" -w -t 60 start >/dev/null
export DATABASE_URL="postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pg_ctl -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  if [ "${passed:-false}" = true ] && [ "$keep" = false ]; then rm -rf "$tmp"; else echo "chaos.sh: kept $tmp" >&2; fi
}
trap cleanup EXIT

# --- the processes ----------------------------------------------------------
go build -tags "${CHAOS_BUILD_TAGS:-}" -o "$tmp/opledger" ./cmd/opledger
bin=$tmp/opledger
"$bin" migrate >"$tmp/migrate.log" 2>&1

profiles=(stripe-v1 stripe-v2 meridian)
profile=${profiles[$(( RANDOM % 3 ))]}
export PROVIDER_PROFILE=$profile OPLEDGER_LOG_LEVEL=warn
simport=$(free_port) apiport=$(free_port)
SIM=http://127.0.0.1:$simport API=http://127.0.0.1:$apiport
export PROVIDER_URL=$SIM
"$bin" provider-sim --listen "127.0.0.1:$simport" --profile "$profile" >"$tmp/provider-sim.log" 2>&1 &
pids+=($!)

AGENT=chaos-agent-token-$seed OPERATOR=chaos-operator-token-$seed
printf 'agent %s chaos-agent\nworker chaos-worker-token-%s\noperator %s chaos-operator\nauditor chaos-auditor-token-%s\n' \
  "$AGENT" "$seed" "$OPERATOR" "$seed" >"$tmp/tokens"
head -c 32 /dev/urandom | base64 >"$tmp/signing.key"
"$bin" serve --listen "127.0.0.1:$apiport" --tokens "$tmp/tokens" --signing-key "$tmp/signing.key" \
  --sweep-interval 1s --reconcile-interval 2s >"$tmp/serve.log" 2>&1 &
serve_pid=$!
pids+=($serve_pid)

declare -A wpid wstate wresume # worker -> pid, state (running, stopped), when to resume a stopped one
start_worker() {
  "$bin" worker --worker-id "$1" --concurrency 2 >>"$tmp/$1.log" 2>&1 &
  wpid[$1]=$!
  wstate[$1]=running
  pids+=($!)
}
for i in $(seq 1 "$workers"); do start_worker "w$i"; done

wait_for "provider-sim" 30 curl -sf "$SIM/_sim/clock"
wait_for "serve" 60 curl -sf "$API/readyz"
log "up: provider-sim ($profile) on $simport, serve on $apiport, PostgreSQL on $pgport"

# --- the agents: refunds through the API ------------------------------------
api() { # method path token [body]
  curl -sS -m 10 -X "$1" "$API$2" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' ${4:+-d "$4"}
}
faults=(lose-response-after-commit 5xx-after-commit 5xx-before-commit hold-response reject-validation drop-connection-before-read delay decline)
: >"$tmp/ops"
drive() {
  # Bounded: ops operations, each retried a few times while PostgreSQL restarts.
  for i in $(seq 1 "$ops"); do
    local key="chaos-$seed-$i" op=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      op=$(curl -sS -m 10 -X POST "$API/v1/operations" -H "Authorization: Bearer $AGENT" -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $key" -d "{\"order_id\":\"ORD-$seed-$i\",\"amount_minor\":$(( 100 + i * 37 )),\"currency\":\"EUR\",\"order_total_minor\":100000}" \
        2>/dev/null | jq -r '.operation_id // empty' 2>/dev/null) && [ -n "$op" ] && break
      sleep 1
    done
    [ -n "$op" ] || { echo "chaos.sh: could not request operation $i" >>"$tmp/chaos.log"; continue; }
    echo "$op" >>"$tmp/ops"
    if [ $(( i % 3 )) = 0 ]; then # arm a provider fault for this operation's first request
      local f=${faults[$(( (i * 7 + seed) % ${#faults[@]} ))]} body
      body="{\"kind\":\"$f\",\"operation_id\":\"$op\"}"
      [ "$f" = delay ] && body="{\"kind\":\"$f\",\"operation_id\":\"$op\",\"duration\":\"2s\"}"
      curl -sS -m 5 -X POST "$SIM/_sim/faults" -d "$body" >/dev/null 2>&1 || true
    fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      api POST "/v1/operations/$op/decisions" "$AGENT" \
        '{"approver":"chaos-agent","approval_limit_minor":50000,"facts":{"order_refundable":true,"chargeback_open":false,"refunded_minor":0}}' \
        2>/dev/null | jq -e '.verdict' >/dev/null 2>&1 && break
      sleep 1
    done
    sleep 0.$(( (i * 7 + seed) % 6 )) # the driver runs in a subshell: no draws from RANDOM here
  done
}
drive &
driver=$!
pids+=($driver)

# --- chaos ------------------------------------------------------------------
declare -A counts
count() { counts[$1]=$(( ${counts[$1]:-0} + 1 )); }
pick_worker() { echo "w$(( RANDOM % workers + 1 ))"; }
stop_until=()
end=$(( $(date +%s) + chaos_s ))
while [ "$(date +%s)" -lt $end ]; do
  sleep "$(( RANDOM % 2 + 1 )).$(( RANDOM % 10 ))"
  now=$(date +%s)
  # resume stopped workers whose time is up
  for w in "${!wstate[@]}"; do
    if [ "${wstate[$w]}" = stopped ] && [ "$now" -ge "${wresume[$w]:-0}" ]; then
      kill -CONT "${wpid[$w]}" 2>/dev/null || true; wstate[$w]=running; log "SIGCONT $w"
    fi
  done
  r=$(( RANDOM % 100 ))
  w=$(pick_worker)
  if [ $r -lt 35 ] && [ "${wstate[$w]}" = running ]; then
    kill -KILL "${wpid[$w]}" 2>/dev/null || true
    wait "${wpid[$w]}" 2>/dev/null || true
    log "SIGKILL $w"; count sigkill
    sleep "0.$(( RANDOM % 10 ))"
    start_worker "$w"
  elif [ $r -lt 60 ] && [ "${wstate[$w]}" = running ]; then
    pause=$(( RANDOM % 12 + 2 ))
    if ! $short && [ $(( RANDOM % 4 )) = 0 ]; then pause=$(( 61 + RANDOM % 10 )); fi # past its lease
    kill -STOP "${wpid[$w]}" 2>/dev/null || true
    wresume[$w]=$(( now + pause )); wstate[$w]=stopped
    log "SIGSTOP $w for ${pause}s"; count sigstop
  elif [ $r -lt 72 ]; then
    mode=fast; [ $(( RANDOM % 2 )) = 0 ] && mode=immediate
    log "restart PostgreSQL ($mode)"; count "pg-restart-$mode"
    pg_ctl -m "$mode" -o "$pgopts" -l "$tmp/postgres.log" -w -t 60 restart >/dev/null 2>&1 || log "restart failed"
  elif [ $r -lt 85 ]; then
    f=${faults[$(( RANDOM % ${#faults[@]} ))]}
    body="{\"kind\":\"$f\"}"
    [ "$f" = delay ] && body="{\"kind\":\"$f\",\"duration\":\"3s\"}"
    curl -sS -m 5 -X POST "$SIM/_sim/faults" -d "$body" >/dev/null 2>&1 && { log "provider fault $f"; count "provider-$f"; } || true
  fi
done

# --- settle -------------------------------------------------------------------
log "chaos over: resuming every worker, letting the ledger settle"
for w in "${!wstate[@]}"; do kill -CONT "${wpid[$w]}" 2>/dev/null || true; wstate[$w]=running; done
curl -sS -m 5 -X POST "$SIM/_sim/faults/release" >/dev/null 2>&1 || true
wait "$driver" 2>/dev/null || true
pg_ctl status >/dev/null 2>&1 || pg_ctl -o "$pgopts" -l "$tmp/postgres.log" -w -t 60 start >/dev/null

terminal() { # every operation is Completed, NotApplied, Denied or Escalated
  local op state
  while read -r op; do
    state=$(api GET "/v1/operations/$op" "$OPERATOR" 2>/dev/null | jq -r '.state // empty')
    case $state in Completed|NotApplied|Denied|Escalated) ;; *) echo "$op $state" >"$tmp/not-terminal"; return 1 ;; esac
  done <"$tmp/ops"
}
settle_bound=150
$short && settle_bound=$(( 110 - ($(date +%s) - started) ))
[ $settle_bound -lt 70 ] && settle_bound=70 # a lease (60 s) must be able to lapse, and be reconciled
settled=true
wait_for "every operation terminal" "$settle_bound" terminal || settled=false

# --- diagnostics: what an operation that did not settle waits for ---------------
# On a failed settle, for every operation not terminal: its read model (what
# the API answered), its stream in the log, its queue rows (claimed by whom,
# hidden for how long), its set-aside items and its lines in the logs; and
# once: where the relays and the projector stand against the log's end, and
# who holds the leader locks. Written to stuck.txt and printed (CI keeps only
# the output).
psql_() { "$pgbin/psql" "$DATABASE_URL" -X -q -P pager=off -P footer=off -c "$1" 2>&1 || true; }
diagnose() {
  local op state ids
  while read -r op; do
    state=$(api GET "/v1/operations/$op" "$OPERATOR" 2>/dev/null | jq -r '.state // empty')
    case $state in Completed|NotApplied|Denied|Escalated) continue ;; esac
    echo "== $op: $state (not terminal)"
    echo "-- read model"
    api GET "/v1/operations/$op" "$OPERATOR" 2>&1 | jq -c '{state, attempt, version, projection_incomplete, executions: [.executions[]? | {execution_id, state, lease_epoch, outcome}]}' 2>&1
    echo "-- its stream in the log"
    psql_ "SELECT global_position, transaction_id, stream_version, event_type, recorded_at FROM opledger_store.events WHERE stream_id = 'operation-$op' ORDER BY stream_version"
    echo "-- its queue rows"
    psql_ "SELECT id, topic, message_id, state, attempts, uncounted, claimed_by, date_trunc('second', visible_at - now()) AS hidden_for, created_at, settled_at, left(last_error, 160) AS last_error, dead_reason FROM opledger_transport.messages WHERE key = '$op' ORDER BY id"
    echo "-- set aside"
    psql_ "SELECT role, item, reason, attempts, set_aside_at, left(detail, 160) AS detail FROM opledger_transport.set_aside WHERE operation_id = '$op'"
    echo "-- in the logs"
    ids=$(printf '%s\n' "$op"; "$pgbin/psql" "$DATABASE_URL" -X -q -A -t -c "SELECT message_id FROM opledger_transport.messages WHERE key = '$op'" 2>/dev/null)
    (cd "$tmp" && grep -F -h -f <(printf '%s\n' "$ids" | sed '/^$/d') serve.log w*.log 2>/dev/null | cut -c1-400 | tail -n 30)
  done <"$tmp/ops"
  echo "== the log's end, the relays' and the projector's positions"
  psql_ "SELECT transaction_id || '/' || global_position AS log_head, pg_snapshot_xmin(pg_current_snapshot()) AS xmin FROM opledger_store.events WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY transaction_id DESC, global_position DESC LIMIT 1"
  psql_ "SELECT name, position, updated_at FROM opledger_transport.relay_checkpoints ORDER BY name"
  psql_ "SELECT name, position, events_applied, updated_at FROM opledger.projection_checkpoints ORDER BY name"
  echo "== the queue, by state"
  psql_ "SELECT topic, state, count(*), count(*) FILTER (WHERE visible_at > now()) AS hidden, min(visible_at - now()) FILTER (WHERE visible_at > now()) AS next_visible_in FROM opledger_transport.messages GROUP BY topic, state ORDER BY topic, state"
  echo "== sessions and advisory locks"
  psql_ "SELECT a.application_name, a.pid, a.state, a.backend_start, l.objid IS NOT NULL AS holds_advisory_lock FROM pg_stat_activity a LEFT JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted WHERE a.datname IS NOT NULL ORDER BY a.application_name, a.pid"
  echo "== warnings and errors in the logs"
  (cd "$tmp" && grep -h -E '"level":"(WARN|ERROR)"' serve.log w*.log 2>/dev/null | grep -v 'NOT SYNCHRONOUSLY REPLICATED\|plain tokens' | cut -c1-300 | tail -n 40)
}

# --- checks -------------------------------------------------------------------
fails=()
curl -sS -m 10 "$SIM/_sim/ledger" >"$tmp/provider-ledger.json"
curl -sS -m 10 "$SIM/_sim/ledger/export" >"$tmp/provider-export.jsonl"
doubles=$(jq -r '.by_operation | to_entries[] | select(.value.refunds_created > 1) | "\(.key) \(.value.refunds_created)"' "$tmp/provider-ledger.json" | paste -sd, -)
[ -z "$doubles" ] || fails+=("refunds-per-operation: $doubles")
if ! "$bin" audit verify --json >"$tmp/verify.json" 2>"$tmp/verify.err"; then
  fails+=("audit-verify: $(jq -c '[.violations[]? | .invariant + " " + .message] | .[:5]' "$tmp/verify.json" 2>/dev/null || cat "$tmp/verify.err")")
fi
"$bin" audit provider-diff --provider-ledger "$tmp/provider-export.jsonl" --json >"$tmp/diff.json" 2>"$tmp/diff.err" || true
if ! jq -e . "$tmp/diff.json" >/dev/null 2>&1; then
  fails+=("audit-provider-diff: $(head -c 300 "$tmp/diff.err")")
else
  bad=$(jq -r '(.unknown_to_provider_count + .mismatch_count)' "$tmp/diff.json")
  [ "$bad" = 0 ] || fails+=("audit-provider-diff: $(jq -c '{unknown_to_provider, mismatches}' "$tmp/diff.json" | head -c 600)")
  for op in $(jq -r '.unknown_to_ledger[]?.operation_id' "$tmp/diff.json"); do
    state=$(api GET "/v1/operations/$op" "$OPERATOR" | jq -r '.state')
    [ "$state" = Escalated ] || fails+=("audit-provider-diff: $op has a refund at the provider, no completion, and is $state, not Escalated")
  done
fi
$settled || fails+=("quiescence: not every operation terminal after ${settle_bound}s: $(cat "$tmp/not-terminal" 2>/dev/null)")

states=$(while read -r op; do api GET "/v1/operations/$op" "$OPERATOR" | jq -r '.state'; done <"$tmp/ops" | sort | uniq -c | awk '{printf "%s\"%s\":%s", (n++ ? "," : ""), $2, $1}')
actions=$(for k in "${!counts[@]}"; do printf '"%s":%s\n' "$k" "${counts[$k]}"; done | sort | paste -sd, -)
refunds=$(jq '.refunds_created' "$tmp/provider-ledger.json")
violations=$(printf '%s\n' "${fails[@]}" | jq -R . | jq -sc 'map(select(length > 0))')
printf '{"seed":%s,"profile":"%s","operations":%s,"states":{%s},"refunds_created":%s,"chaos":{%s},"violations":%s,"elapsed_s":%s}\n' \
  "$seed" "$profile" "$(wc -l <"$tmp/ops")" "$states" "$refunds" "$actions" "$violations" "$(( $(date +%s) - started ))"
if [ ${#fails[@]} -gt 0 ]; then
  printf 'chaos.sh: FAILED (seed %s):\n' "$seed" >&2
  printf '  %s\n' "${fails[@]}" >&2
  if ! $settled; then
    diagnose >"$tmp/stuck.txt" 2>&1 || true
    echo "chaos.sh: what the operations that did not settle wait for ($tmp/stuck.txt):" >&2
    head -c 40000 "$tmp/stuck.txt" >&2
  fi
  echo "chaos.sh: replay the choices with: scripts/chaos.sh --seed $seed$($short && echo ' --short')" >&2
  exit 1
fi
passed=true
