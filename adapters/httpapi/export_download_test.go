package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

// exportDownload is the body of an export-download request.
func exportDownload(export string) map[string]any {
	return map[string]any{"kind": "export-download", "export_id": export}
}

func withExports(c *httpapi.Config) {
	c.EnabledKinds = []domain.OperationKind{domain.KindExportDownload}
}

// TestTheExportKindIsRefusedUntilEnabled: a server that does not enable
// export downloads refuses to create one (its events are written at a
// version the release before refuses), naming the field, and records
// nothing; refunds are created as ever.
func TestTheExportKindIsRefusedUntilEnabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.must(http.StatusUnprocessableEntity, e.call(httpapi.RoleAgent, "POST", "/v1/operations", exportDownload("EXP-1"), "Idempotency-Key", "exp-off"))
	require.Equal(t, httpapi.CodeKindDisabled, r.code())
	require.Equal(t, "kind", r.field())
	require.Empty(t, e.streamTypes(httpapi.OperationIDForKey("exp-off").StreamName()), "nothing recorded")
	r = e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-1"), "Idempotency-Key", "refund-on"))
	require.Equal(t, "refund", r.str("kind"))
}

// TestAnExportDownloadsRequestAndDecisionTakeItsOwnFields: strict per
// kind, each refusal naming the field.
func TestAnExportDownloadsRequestAndDecisionTakeItsOwnFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExports)
	for i, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"kind": "export-download"}, "export_id"},
		{map[string]any{"kind": "export-download", "export_id": "EXP 1"}, "export_id"},
		{map[string]any{"kind": "export-download", "export_id": "EXP-1", "amount_minor": 100}, "amount_minor"},
		{map[string]any{"kind": "export-download", "export_id": "EXP-1", "order_id": "ORD-1"}, "order_id"},
		{map[string]any{"kind": "download-everything", "export_id": "EXP-1"}, "kind"},
		{map[string]any{"kind": "", "export_id": "EXP-1"}, "kind"},
		{map[string]any{"order_id": "ORD-1", "amount_minor": 100, "currency": "EUR", "export_id": "EXP-1"}, "export_id"},
	} {
		r := e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations", c.body, "Idempotency-Key", fmt.Sprintf("bad-%d", i)))
		require.Equal(t, c.field, r.field(), "body %v: %s", c.body, r.raw)
	}

	created := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", exportDownload("EXP-7781"), "Idempotency-Key", "exp-1"))
	require.Equal(t, "export-download", created.str("kind"))
	op := created.str("operation_id")
	again := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", exportDownload("EXP-7781"), "Idempotency-Key", "exp-1"))
	require.Equal(t, created.raw, again.raw)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	r := e.must(http.StatusUnprocessableEntity, e.call(httpapi.RoleAgent, "POST", "/v1/operations", exportDownload("EXP-OTHER"), "Idempotency-Key", "exp-1"))
	require.Equal(t, httpapi.CodeIdempotencyKeyReused, r.code())

	path := "/v1/operations/" + op + "/decisions"
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"approver": "ops-lead", "facts": map[string]any{"export_ready": true}}, "uses"},
		{map[string]any{"approver": "ops-lead", "uses": 11, "facts": map[string]any{"export_ready": true}}, "uses"},
		{map[string]any{"approver": "ops-lead", "uses": 0, "facts": map[string]any{"export_ready": true}}, "uses"},
		{map[string]any{"approver": "ops-lead", "uses": 3, "facts": map[string]any{}}, "facts.export_ready"},
		{map[string]any{"approver": "ops-lead", "uses": 3, "approval_limit_minor": 100, "facts": map[string]any{"export_ready": true}}, "approval_limit_minor"},
		{map[string]any{"approver": "ops-lead", "uses": 3, "facts": map[string]any{"export_ready": true, "chargeback_open": false}}, "facts.chargeback_open"},
	} {
		r := e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", path, c.body))
		require.Equal(t, c.field, r.field(), "body %v: %s", c.body, r.raw)
	}
	denied := e.must(http.StatusOK, e.call(httpapi.RoleAgent, "POST", path, map[string]any{"approver": "ops-lead", "uses": 3, "facts": map[string]any{"export_ready": false}}))
	require.Equal(t, "Denied", denied.str("verdict"))
	require.Equal(t, []any{string(domain.ReasonPolicyExportNotReady)}, denied.body["reasons"])
	require.Nil(t, denied.body["capability"])

	// A refund's decision takes no export fact, and is single use.
	refundOp := e.create("refund-1")
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0, "export_ready": true}}, "facts.export_ready"},
		{map[string]any{"approver": "ops-lead", "approval_limit_minor": 10_000, "uses": 2, "facts": okFacts}, "uses"},
	} {
		r := e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations/"+string(refundOp)+"/decisions", c.body))
		require.Equal(t, c.field, r.field(), "body %v: %s", c.body, r.raw)
	}
}

// TestThreeDownloadsOfAnExport: the API end to end for the bounded kind —
// a decision of three uses, three claims each answering its use, the uses
// left, its own key and the export to deliver; a claim while a use is
// executing refused without spending it; the fourth presentation
// AlreadyConsumed, replay suspected; the read model's uses left.
func TestThreeDownloadsOfAnExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withExports)
	created := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", exportDownload("EXP-7781"), "Idempotency-Key", "exp-3"))
	op := domain.OperationID(created.str("operation_id"))
	d := e.must(http.StatusOK, e.call(httpapi.RoleAgent, "POST", "/v1/operations/"+string(op)+"/decisions",
		map[string]any{"approver": "ops-lead", "uses": 3, "facts": map[string]any{"export_ready": true}}))
	require.Equal(t, "Allowed", d.str("verdict"))
	require.Equal(t, "export-download", d.str("kind"))
	require.EqualValues(t, 3, d.body["uses"])
	require.Equal(t, domain.ExportPolicyVersion, d.str("policy_version"))
	capability := d.body["capability"].(map[string]any)
	require.EqualValues(t, 3, capability["uses"])
	token := capability["token"].(string)

	keys := map[string]bool{}
	for n := 1; n <= 3; n++ {
		r := e.must(http.StatusOK, e.claim(op, fmt.Sprintf("MSG-DL-%d", n), token))
		require.Equal(t, "Claimed", r.str("status"), "body: %s", r.raw)
		require.Equal(t, "export-download", r.str("kind"))
		require.EqualValues(t, n, r.body["use"])
		require.EqualValues(t, 3-n, r.body["uses_left"])
		require.Equal(t, "EXP-7781", r.str("export_id"))
		require.Nil(t, r.body["amount_minor"], "no refund fields for an export")
		key := r.str("idempotency_key")
		require.Equal(t, fmt.Sprintf("export-%s-a1-u%d", op, n), key)
		require.False(t, keys[key])
		keys[key] = true
		x := r.str("execution_id")
		if n == 1 {
			busy := e.must(http.StatusOK, e.claim(op, "MSG-DL-BUSY", token))
			require.Equal(t, "OperationNotExecutable", busy.str("status"))
			require.Equal(t, string(domain.ReasonOperationExecuting), busy.str("reason"))
		}
		e.must(http.StatusOK, e.post(httpapi.RoleWorker, "/v1/executions/"+x+"/outcome",
			map[string]any{"lease_epoch": 1, "lease_secret": r.str("lease_secret"), "outcome": "Completed", "provider_reference": fmt.Sprintf("dl_%d", n)}))
	}
	r := e.must(http.StatusOK, e.claim(op, "MSG-DL-4", token))
	require.Equal(t, "AlreadyConsumed", r.str("status"))
	require.Equal(t, true, r.body["replay_suspected"])
	require.Equal(t, false, r.body["execution_attempted"])
	require.Contains(t, r.str("detail"), "all 3 uses consumed")

	v := e.waitRead("/v1/operations/"+string(op), func(r response) bool {
		return r.status == http.StatusOK && len(r.body["executions"].([]any)) == 3 && r.str("state") == "Completed"
	})
	require.Equal(t, "export-download", v.str("kind"))
	require.Equal(t, "EXP-7781", v.str("export_id"))
	require.Nil(t, v.body["amount_minor"])
	require.Nil(t, v.body["order_id"])
	require.EqualValues(t, 0, v.body["uses_left"])
	for i, x := range v.body["executions"].([]any) {
		require.EqualValues(t, i+1, x.(map[string]any)["use"])
	}
}
