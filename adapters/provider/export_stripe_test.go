package provider_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/audit"
)

// records reads every record of export, or the error that stopped it.
func records(export audit.ProviderExport) ([]audit.ProviderRecord, error) {
	var out []audit.ProviderRecord
	err := export.Records(func(r audit.ProviderRecord) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// TestProviderExportIsReadStrictly: each line is one JSON object with exact,
// unrepeated names, valid UTF-8 and printable text; a refusal names the
// line and the field. Unknown fields stay accepted (providers add fields),
// but not a case-variant of a known one: which amount would the diff use?
func TestStripeExportIsReadStrictly(t *testing.T) {
	const ok = `{"id":"re_1","operation_id":"OP-1","amount":100,"currency":"eur","status":"succeeded"}`
	for _, c := range []struct{ name, line, want string }{
		{"case-variant", `{"id":"re_1","amount":100,"Amount":99999999,"status":"succeeded"}`, `line 2: field Amount: names match exactly: the field is "amount"`},
		{"case-variant of id", `{"ID":"re_x","id":"re_1","status":"succeeded"}`, `line 2: field ID:`},
		{"duplicate", `{"id":"re_1","amount":-5,"amount":5,"status":"succeeded"}`, "line 2: amount: duplicate field"},
		{"nested duplicate in an unknown field", `{"id":"re_1","status":"succeeded","metadata":{"a":"1","a":"2"}}`, "line 2: metadata.a: duplicate field"},
		{"NUL in id", `{"id":"re_\u0000","status":"succeeded"}`, "line 2: field id: id holds a NUL character"},
		{"ESC in operation id", `{"id":"re_1","operation_id":"OP-\u001b[2J","status":"succeeded"}`, "line 2: field operation_id: operation_id holds control character U+001B"},
		{"RLO in currency", `{"id":"re_1","currency":"\u202eeur","status":"succeeded"}`, "line 2: field currency:"},
		{"control in order", `{"id":"re_1","order":"ORD\r\n1","status":"succeeded"}`, "line 2: field order:"},
		{"invalid UTF-8", "{\"id\":\"re_\xff\",\"status\":\"succeeded\"}", "line 2: id: invalid UTF-8"},
		{"wrong type", `{"id":"re_1","amount":"12","status":"succeeded"}`, "line 2: amount: must be an integer"},
		{"null", `null`, "line 2: must be one JSON object, got JSON null"},
		{"array", `[` + ok + `]`, "line 2: must be one JSON object, got JSON array"},
		{"number", `12`, "line 2: must be one JSON object, got JSON number"},
		{"two objects", ok + ok, "line 2: more than one JSON value"},
		{"trailing garbage", ok + ` x`, "line 2: data after the JSON object"},
	} {
		export := `{"id":"re_0","status":"succeeded"}` + "\n" + c.line + "\n"
		_, err := records(provider.StripeExport(strings.NewReader(export)))
		require.ErrorIs(t, err, audit.ErrMalformedExport, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "\x00", c.name)
		require.NotContains(t, err.Error(), "\x1b", c.name)
	}

	// Unknown fields, nested ones too, are accepted and ignored.
	got, err := records(provider.StripeExport(strings.NewReader(
		`{"id":"re_1","status":"failed","livemode":false,"metadata":{"operation_id":"OP-1"},"amount_details":{"tax":0}}` + "\n")))
	require.NoError(t, err)
	require.Equal(t, []audit.ProviderRecord{{Line: 1, Reference: "re_1", State: domain.EffectNotApplied, Status: "failed"}}, got)
}

// Each line becomes a neutral record: Stripe's statuses mapped onto the
// model's states, the provider's word kept for reports, blank lines skipped
// but counted.
func TestStripeExportRecords(t *testing.T) {
	got, err := records(provider.StripeExport(strings.NewReader(
		`{"id":"re_1","operation_id":"OP-1","idempotency_key":"refund-OP-1-a1","amount":12000,"currency":"eur","order":"ORD-1","status":"succeeded","created":1}` + "\n\n" +
			`{"id":"re_2","operation_id":"OP-2","amount":500,"currency":"eur","status":"pending"}` + "\n" +
			`{"id":"re_3","status":"canceled"}`)))
	require.NoError(t, err)
	require.Equal(t, []audit.ProviderRecord{
		{Line: 1, Reference: "re_1", OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", AmountMinor: 12000, Currency: "eur",
			State: domain.EffectApplied, Status: "succeeded"},
		{Line: 3, Reference: "re_2", OperationID: "OP-2", AmountMinor: 500, Currency: "eur", State: domain.EffectInProgress, Status: "pending"},
		{Line: 4, Reference: "re_3", State: domain.EffectNotApplied, Status: "canceled"},
	}, got)
}

// The refusals of whole lines: syntax across lines, no id, no status, an
// over-long line.
func TestStripeExportRefusesMalformedLines(t *testing.T) {
	for _, c := range []struct{ export, want string }{
		{"{\"id\":\"re_1\",\"status\":\"succeeded\"}\n\n{\"id\":\"re_2\",\"status\":\"succ", "line 3"},
		{"[1,2]\n", "line 1"},
		{"{\"status\":\"succeeded\"}\n", "line 1: refund without an id"},
		{"{\"id\":\"re_1\"}\n", "line 1: refund re_1 without a status"},
		{"{\"id\":\"re_1\",\"status\":\"succeeded\"} {\"id\":\"re_2\"}\n", "line 1: more than one JSON value"},
		{"{\"id\":\"re_1\",\"status\":\"succeeded\",\"amount\":\"12\"}\n", "line 1"},
		{strings.Repeat(" ", provider.MaxExportLine+1) + "\n", "line 1: longer than"},
	} {
		_, err := records(provider.StripeExport(strings.NewReader(c.export)))
		require.ErrorIs(t, err, audit.ErrMalformedExport, c.want)
		require.ErrorContains(t, err, c.want)
	}
}
