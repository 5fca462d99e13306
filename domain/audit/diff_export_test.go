package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain/audit"
)

// TestProviderExportIsReadStrictly: each line is one JSON object with exact,
// unrepeated names, valid UTF-8 and printable text; a refusal names the
// line and the field. Unknown fields stay accepted (providers add fields),
// but not a case-variant of a known one: which amount would the diff use?
func TestProviderExportIsReadStrictly(t *testing.T) {
	store := newMemoryStore()
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
		_, err := audit.ProviderDiff(context.Background(), store, strings.NewReader(export))
		require.ErrorIs(t, err, audit.ErrMalformedExport, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "\x00", c.name)
		require.NotContains(t, err.Error(), "\x1b", c.name)
	}

	// Unknown fields, nested ones too, are accepted and ignored.
	d, err := audit.ProviderDiff(context.Background(), store, strings.NewReader(
		`{"id":"re_1","status":"failed","livemode":false,"metadata":{"operation_id":"OP-1"},"amount_details":{"tax":0}}`+"\n"))
	require.NoError(t, err)
	require.Equal(t, int64(1), d.ProviderRefunds)
}
