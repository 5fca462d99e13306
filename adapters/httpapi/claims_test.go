package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/domain"
)

// TestClaimAnswers: Claimed with what the ledger says (never the message),
// then the answers to a redelivery, a replay on a new message and a
// capability the operation barrier refuses.
func TestClaimAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("claim-1")
	capID, token := e.allow(op)

	r := e.must(http.StatusOK, e.claim(op, "MSG-1", token))
	require.Equal(t, "Claimed", r.str("status"), "body: %s", r.raw)
	require.Equal(t, false, r.body["execution_attempted"])
	require.Equal(t, domain.ChildID(domain.PrefixExecution, op, 1), r.str("execution_id"))
	require.EqualValues(t, 1, r.body["lease_epoch"])
	require.Equal(t, string(domain.IdempotencyKeyFor(op, 1)), r.str("idempotency_key"))
	require.EqualValues(t, 4500, r.body["amount_minor"])
	require.Equal(t, "EUR", r.str("currency"))
	require.Equal(t, "ORD-claim-1", r.str("order_id"))
	require.Equal(t, start.Add(domain.DefaultLeaseDuration).Format("2006-01-02T15:04:05Z07:00"), r.str("lease_expires_at"))
	require.Len(t, r.str("lease_secret"), 43, "the lease secret: 32 random bytes, base64url")
	require.Equal(t, "no-store", r.header.Get("Cache-Control"))
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.LeaseSecretDigest(r.str("lease_secret")), s.Executions[0].HeldLeases[0].SecretDigest, "the ledger keeps its digest")

	// The same message again: a transport duplicate, reported, not executed.
	r = e.must(http.StatusOK, e.claim(op, "MSG-1", token))
	require.Equal(t, "DuplicateDelivery", r.str("status"))
	require.Equal(t, string(domain.ReasonDeliveryDuplicate), r.str("reason"))
	require.Equal(t, "Executing", r.str("execution_state"))
	require.Empty(t, r.str("lease_secret"), "only the claim that opened the execution holds its lease")

	// The spent token on a new message: a replay.
	r = e.must(http.StatusOK, e.claim(op, "MSG-2", token))
	require.Equal(t, "AlreadyConsumed", r.str("status"))
	require.Equal(t, string(domain.ReasonCapabilityAlreadyConsumed), r.str("reason"))
	require.Equal(t, true, r.body["replay_suspected"])
	require.Equal(t, false, r.body["execution_attempted"])

	// A second genuine capability while the first execution runs.
	_ = capID
	_, second := e.allowDespiteExecution(op)
	r = e.must(http.StatusOK, e.claim(op, "MSG-3", second))
	require.Equal(t, "OperationNotExecutable", r.str("status"))
	require.Equal(t, string(domain.ReasonOperationExecuting), r.str("reason"))

	// A token of another operation presented for this one.
	other := e.create("claim-2")
	_, otherToken := e.allow(other)
	r = e.must(http.StatusOK, e.claim(op, "MSG-4", otherToken))
	require.Equal(t, "Invalid", r.str("status"))
	require.Equal(t, string(domain.ReasonCapabilityWrongOperation), r.str("reason"))

	// Claims to an operation that does not exist are recorded as evidence.
	r = e.must(http.StatusOK, e.claim("OP-NOPE", "MSG-5", token))
	require.Equal(t, "Invalid", r.str("status"))
	require.Equal(t, string(domain.ReasonOperationUnknown), r.str("reason"))

	// Missing fields are named.
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleWorker, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG-6", "operation_id": string(op), "worker_id": "worker-1",
	}))
	require.Equal(t, "capability", r.field())
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleWorker, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG 6", "operation_id": string(op), "worker_id": "worker-1", "capability": token,
	}))
	require.Equal(t, "message_id", r.field())
}

// allowDespiteExecution issues a second capability through the ledger
// (the API refuses a decision while an execution runs, rightly).
func (e *env) allowDespiteExecution(op domain.OperationID) (domain.CapabilityID, string) {
	e.t.Helper()
	issued, err := e.h.IssueCapability(e.t.Context(), op, domain.IssueCapability{}, ledgerCause)
	require.NoError(e.t, err)
	token, err := e.signer.TokenFor(op, issued)
	require.NoError(e.t, err)
	return issued.CapabilityID, token
}

// TestForgedTokensAreRefusedAndRecorded: a forged, altered or unreadable
// token is refused capability.invalid, recorded in the unattributed evidence
// stream, and the operation's stream is not touched; the genuine token still
// claims afterwards, on the same message id.
func TestForgedTokensAreRefusedAndRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("forged-1")
	capID, genuine := e.allow(op)
	before := e.streamVersion(op)

	otherKey, err := captoken.NewSigner(bytes.Repeat([]byte{1}, captoken.SeedSize))
	require.NoError(t, err)
	claims, err := e.signer.Verify(genuine)
	require.NoError(t, err)
	forged, err := otherKey.Sign(claims)
	require.NoError(t, err)
	payload, sig, _ := strings.Cut(genuine, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	altered := base64.RawURLEncoding.EncodeToString(bytes.Replace(raw, []byte(`"att":1`), []byte(`"att":2`), 1)) + "." + sig

	cases := []struct {
		token, detail string
		capability    string
	}{
		{forged, "signature does not verify", string(capID)},
		{altered, "signature does not verify", string(capID)},
		{"garbage", "malformed", "CAP-UNREADABLE-" + captoken.Fingerprint("garbage")},
	}
	for i, c := range cases {
		r := e.must(http.StatusOK, e.claim(op, "MSG-F", c.token))
		require.Equal(t, "Invalid", r.str("status"), "case %d", i)
		require.Equal(t, string(domain.ReasonCapabilityInvalid), r.str("reason"), "case %d", i)
		require.Equal(t, false, r.body["execution_attempted"])
		require.Contains(t, r.str("detail"), c.detail)
		require.NotContains(t, r.str("detail"), c.token, "the token is never echoed")
	}
	require.Equal(t, before, e.streamVersion(op), "the operation's stream is untouched")

	// Each refusal is evidence, naming the message, the claimed operation,
	// the reason and what was wrong.
	recs, err := e.store.ReadStream(t.Context(), e.unattributed(), 0, 100)
	require.NoError(t, err)
	require.Len(t, recs, len(cases))
	for i, rec := range recs {
		ev := decode(t, rec).(domain.PresentationRejected)
		require.Equal(t, domain.MessageID("MSG-F"), ev.MessageID)
		require.Equal(t, op, ev.OperationID)
		require.Equal(t, domain.ReasonCapabilityInvalid, ev.Reason)
		require.Equal(t, domain.StatusInvalid, ev.Status)
		require.Equal(t, "worker-1", ev.WorkerID)
		require.False(t, ev.ExecutionAttempted)
		require.Equal(t, domain.CapabilityID(cases[i].capability), ev.CapabilityID)
		require.Contains(t, ev.Detail, cases[i].detail)
	}

	// The evidence read model shows them too.
	r := e.waitRead("/v1/evidence?reason=capability.invalid&operation_id="+string(op), func(r response) bool {
		return r.status == http.StatusOK && len(r.body["evidence"].([]any)) == len(cases)
	})
	first := r.body["evidence"].([]any)[0].(map[string]any)
	require.Equal(t, "MSG-F", first["message_id"])
	require.Equal(t, false, first["execution_attempted"])

	// The genuine token still claims, even on the same message id: the
	// forged presentations changed nothing of the operation.
	r = e.must(http.StatusOK, e.claim(op, "MSG-F", genuine))
	require.Equal(t, "Claimed", r.str("status"), "body: %s", r.raw)
}
