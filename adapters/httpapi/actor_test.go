package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// Two worker tokens whose names are not the worker labels their callers
// give: the principal and the label must not be mistaken for each other.
const (
	northToken = "fleet-north-token-0123456789"
	southToken = "fleet-south-token-0123456789"
)

const fleetsTokenFile = tokenFile + `
worker   ` + northToken + `  fleet-north
worker   ` + southToken + `  fleet-south
`

// recordedEvent is an event as the log holds it, decoded.
type recordedEvent struct {
	stream string
	meta   domain.Metadata
	event  domain.Event
}

// history is every event of op's stream and of its evidence stream, in
// log order, and of the unattributed streams naming op, as far as the
// global log shows them yet (it shows an event once no transaction that
// could come before it is open).
func (e *env) history(op domain.OperationID) []recordedEvent {
	e.t.Helper()
	var out []recordedEvent
	var after eventstore.Position
	for {
		page, err := e.store.ReadAll(e.t.Context(), after, 1000)
		require.NoError(e.t, err)
		for _, rec := range page {
			after = rec.Position
			owner, _, isOp := domain.OperationOfStream(rec.StreamID)
			if !(isOp && owner == op) && !domain.IsUnattributedStream(rec.StreamID) {
				continue
			}
			d, err := codec.DecodeRecorded(rec)
			require.NoError(e.t, err)
			if rej, ok := d.Event.(domain.PresentationRejected); !isOp && (!ok || rej.OperationID != op) {
				continue
			}
			out = append(out, recordedEvent{stream: rec.StreamID, meta: d.Meta, event: d.Event})
		}
		if len(page) < 1000 {
			return out
		}
	}
}

// TestTheActorIsTheAuthenticatedPrincipal: a worker names another worker
// as its worker_id. Every event its requests cause names its token's NAME as
// the actor; the worker_id it gave is kept as what it is, the worker label,
// beside it — on the claim, on the refused presentation (replay suspected),
// on the forged token's unattributed evidence, on refused writes — and the
// evidence read model shows both.
func TestTheActorIsTheAuthenticatedPrincipal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(cfg *httpapi.Config) {
		tokens, err := httpapi.ParseTokens(strings.NewReader(fleetsTokenFile), "tokens")
		require.NoError(t, err)
		cfg.Tokens = tokens
	})
	op := e.create("actor-1")
	_, token := e.allow(op)
	claim := e.must(http.StatusOK, e.as(northToken, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG-actor-1", "operation_id": string(op), "capability": token, "worker_id": "worker-7",
	}))
	require.Equal(t, "Claimed", claim.str("status"), "body: %s", claim.raw)
	x := claim.str("execution_id")

	// fleet-south replays the spent capability, naming worker-7 as itself.
	replay := e.must(http.StatusOK, e.as(southToken, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG-actor-2", "operation_id": string(op), "capability": token, "worker_id": "worker-7",
	}))
	require.Equal(t, "AlreadyConsumed", replay.str("status"))
	// ... forges a token, and writes for worker-7's execution without its secret.
	forged := e.must(http.StatusOK, e.as(southToken, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG-actor-3", "operation_id": string(op), "capability": token + "x", "worker_id": "worker-7",
	}))
	require.Equal(t, "Invalid", forged.str("status"))
	write := e.as(southToken, "POST", "/v1/executions/"+x+"/lease", map[string]any{"lease_epoch": 1, "lease_secret": "guess", "worker_id": "worker-7"})
	require.Equal(t, http.StatusConflict, write.status, "body: %s", write.raw)

	var events []recordedEvent
	waitFor(t, "the log to show the claim, the replay, the forged token and the refused write", func() bool {
		events = e.history(op)
		return len(events) >= 7
	})
	seen := map[string]bool{}
	for _, r := range events {
		switch ev := r.event.(type) {
		case domain.Claimed:
			require.Equal(t, "fleet-north", r.meta.Actor)
			require.Equal(t, "worker-7", ev.WorkerID, "the worker label, kept as given")
		case domain.PresentationRejected:
			require.Equal(t, "fleet-south", r.meta.Actor, "%s %s", ev.Reason, r.stream)
			require.Equal(t, "worker-7", ev.WorkerID)
		case domain.WriteRefused:
			require.Equal(t, "fleet-south", r.meta.Actor)
			require.Equal(t, "worker-7", ev.WorkerID)
			require.Equal(t, domain.SecretWrong, ev.SecretCheck)
		default:
			continue
		}
		seen[r.event.EventType()+" "+r.stream] = true
	}
	require.Len(t, seen, 4, "the claim, the replay, the forged token (unattributed) and the refused write: %v", seen)

	rows := e.waitRead("/v1/evidence?operation_id="+string(op), func(r response) bool {
		evs, _ := r.body["evidence"].([]any)
		return r.status == http.StatusOK && len(evs) == 3
	})
	for _, it := range rows.body["evidence"].([]any) {
		row := it.(map[string]any)
		require.Equal(t, "fleet-south", row["actor"], "%v", row)
		require.Equal(t, "worker-7", row["worker"], "%v", row)
		require.EqualValues(t, 1, row["count"])
	}
}
