package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/adapters/provider"
	"opledger/domain"
)

func TestDecisions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *httpapi.Config) { c.Profile = provider.StripeV2; c.CapabilityTTL = 10 * time.Minute })
	op := e.create("decide-1")
	path := "/v1/operations/" + string(op) + "/decisions"

	// Denied: every reason, no capability.
	r := e.must(http.StatusOK, e.call(httpapi.RoleAgent, "POST", path, map[string]any{
		"approver": "ops-lead", "approval_limit_minor": 1_000,
		"facts": map[string]any{"order_refundable": true, "chargeback_open": true, "refunded_minor": 0},
	}))
	require.Equal(t, "Denied", r.str("verdict"))
	require.ElementsMatch(t, []any{string(domain.ReasonPolicyOverApprovalLimit), string(domain.ReasonPolicyChargebackOpen)}, r.body["reasons"])
	require.Nil(t, r.body["capability"])
	require.EqualValues(t, 1, r.body["attempt"])

	// Allowed: a capability with a token that verifies and binds it.
	r = e.must(http.StatusOK, e.call(httpapi.RoleAgent, "POST", path, map[string]any{
		"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": okFacts,
	}))
	require.Equal(t, "Allowed", r.str("verdict"))
	require.Equal(t, []any{}, r.body["reasons"])
	c := r.body["capability"].(map[string]any)
	claims, err := e.signer.Verify(c["token"].(string))
	require.NoError(t, err)
	require.Equal(t, domain.CapabilityID(c["capability_id"].(string)), claims.CapabilityID)
	require.Equal(t, op, claims.OperationID)
	require.Equal(t, 1, claims.Attempt)
	require.Equal(t, start.Add(10*time.Minute).Format(time.RFC3339Nano), c["expires_at"])
	require.True(t, claims.ExpiresAt.Equal(start.Add(10*time.Minute)))

	// The profile's key policy is recorded in the decision.
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	d, _ := s.LatestDecision()
	require.Equal(t, domain.KeyReuseFirst, d.KeyPolicy)

	// Facts must all be stated; an unknown operation is 404.
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", path, map[string]any{
		"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": map[string]any{"order_refundable": true, "refunded_minor": 0},
	}))
	require.Equal(t, "facts.chargeback_open", r.field())
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", path, map[string]any{
		"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": map[string]any{"order_refundable": "yes", "chargeback_open": false, "refunded_minor": 0},
	}))
	require.Equal(t, "facts.order_refundable", r.field())
	r = e.must(http.StatusNotFound, e.call(httpapi.RoleAgent, "POST", "/v1/operations/OP-NOPE/decisions", map[string]any{
		"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": okFacts,
	}))
	require.Equal(t, string(domain.ReasonOperationUnknown), r.code())

	// While an execution is open, no new decision: 409 with the reason.
	_, token := e.allow(op)
	e.must(http.StatusOK, e.claim(op, "MSG-D1", token))
	r = e.must(http.StatusConflict, e.call(httpapi.RoleAgent, "POST", path, map[string]any{
		"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": okFacts,
	}))
	require.Equal(t, string(domain.ReasonOperationExecuting), r.code())
}
