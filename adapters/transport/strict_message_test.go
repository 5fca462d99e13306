package transport_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore/postgres/pgtest"
)

// validValue is a refund request every strict rule accepts.
const validValue = `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","correlation_id":"COR-1"}`

// strictCases are message values each refused, with the field named.
var strictCases = []struct {
	name, value, field string
}{
	{"case-variant", `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","Operation_ID":"OP-2"}`, "Operation_ID"},
	{"case-variant alone", `{"Message_Id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1"}`, "Message_Id"},
	{"duplicate", `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","operation_id":"OP-2"}`, "operation_id"},
	{"unknown nested", `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","extra":{"amount":12000}}`, "extra"},
	{"NUL in message id", `{"message_id":"MSG-\u0000","operation_id":"OP-1","capability_id":"CAP-1"}`, "message_id"},
	{"NUL in operation and capability ids", `{"message_id":"MSG-1","operation_id":"OP-\u0000","capability_id":"CAP-\u0000"}`, "operation_id"},
	{"ESC in operation id", `{"message_id":"MSG-1","operation_id":"OP-\u001b[2J","capability_id":"CAP-1"}`, "operation_id"},
	{"RLO in capability id", `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-\u202e1"}`, "capability_id"},
	{"NUL in correlation id", `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","correlation_id":"C\u0000"}`, "correlation_id"},
	{"NUL in token", `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","capability_token":"v1.\u0000"}`, "capability_token"},
	{"invalid UTF-8", "{\"message_id\":\"MSG-\xff\",\"operation_id\":\"OP-1\",\"capability_id\":\"CAP-1\"}", "message_id"},
	{"wrong type", `{"message_id":7,"operation_id":"OP-1","capability_id":"CAP-1"}`, "message_id"},
	{"null", `null`, ""},
	{"array", `[` + validValue + `]`, ""},
	{"string", `"MSG-1"`, ""},
	{"number", `1`, ""},
	{"two objects", validValue + validValue, ""},
	{"trailing garbage", validValue + `x`, ""},
	{"empty", ``, ""},
}

// TestDecodeRefundRequestIsStrict: exact names, no duplicates, no unknown
// fields, one object, UTF-8, printable identifiers: each refusal is
// ErrMalformed naming the field, its text printable, and what was read is
// returned escaped.
func TestDecodeRefundRequestIsStrict(t *testing.T) {
	t.Parallel()
	_, err := transport.DecodeRefundRequest([]byte(validValue))
	require.NoError(t, err)
	for _, c := range strictCases {
		got, err := transport.DecodeRefundRequest([]byte(c.value))
		require.ErrorIs(t, err, transport.ErrMalformed, c.name)
		var m *transport.MalformedMessage
		require.True(t, errors.As(err, &m), c.name)
		require.Equal(t, c.field, m.Field, "%s: %v", c.name, err)
		if c.field != "" {
			require.Contains(t, err.Error(), "field "+c.field, c.name)
		}
		require.Nil(t, domain.CheckText("reason", err.Error(), 2*domain.MaxTextLength, true), "%s: %q", c.name, err)
		for _, s := range []string{string(got.MessageID), string(got.OperationID), string(got.CapabilityID), string(got.CorrelationID), got.CapabilityToken} {
			require.Nil(t, domain.CheckText("evidence", s, domain.MaxIDLength, false), "%s: what was read is escaped: %q", c.name, s)
		}
	}
}

// TestMalformedMessagesAreDeadLetteredWithTheirField: a malformed message,
// hostile text included, is recorded as evidence in a real store and
// dead-lettered with the reason naming the field: never dropped, and never
// retried for ever on evidence the store cannot hold.
func TestMalformedMessagesAreDeadLetteredWithTheirField(t *testing.T) {
	t.Parallel()
	store := pgtest.OpenStore(t)
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	h, err := ledger.New(ledger.Config{Store: store, Clock: now})
	require.NoError(t, err)
	w := &fakeWorker{}
	d, err := transport.NewDispatcher(transport.DispatcherConfig{Worker: w, Evidence: h, WorkerID: "w1", Clock: now})
	require.NoError(t, err)

	for i, c := range strictCases {
		in := transport.Inbound{Value: []byte(c.value), Origin: transport.Origin{Transport: "kafka", Topic: transport.TopicRefundRequests, Offset: int64(i)}}
		disp := d.Handle(t.Context(), in)
		require.Equal(t, transport.ActionDeadLetter, disp.Action, "%s: %v", c.name, disp.Err)
		require.Equal(t, transport.ReasonDeliveryMalformed, disp.Reason, c.name)
		if c.field != "" {
			require.Contains(t, disp.Detail, "field "+c.field, c.name)
		}
		require.Nil(t, domain.CheckText("detail", disp.Detail, 2*domain.MaxTextLength, true), "%s: %q", c.name, disp.Detail)
	}
	require.Zero(t, w.calls, "no malformed message reaches the worker")
	recs, err := store.ReadStream(t.Context(), domain.UnattributedStreamFor(now.Now()), 0, 1000)
	require.NoError(t, err)
	require.Len(t, recs, len(strictCases), "each malformed message is evidence")
	for _, rec := range recs {
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(t, err)
		ev := dec.Event
		rej := ev.(domain.PresentationRejected)
		require.Equal(t, transport.ReasonDeliveryMalformed, rej.Reason)
		require.False(t, rej.ExecutionAttempted)
		require.False(t, strings.ContainsAny(string(rej.MessageID)+string(rej.OperationID)+rej.Detail, "\x00\x1b\u202e"))
	}
}

// TestDecodeSecuritySignalIsStrict: the same rules, and every text of a
// signal printable (it is printed for people).
func TestDecodeSecuritySignalIsStrict(t *testing.T) {
	t.Parallel()
	good := transport.SecuritySignal{SignalID: "SIG-1", Kind: transport.SignalReplaySuspected, EventID: "e1", Stream: "operation-OP-1",
		OperationID: "OP-1", MessageID: "MSG-2", Status: domain.StatusAlreadyConsumed, Reason: domain.ReasonCapabilityAlreadyConsumed,
		Detail: "consumed by message MSG-1", RejectedAt: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	value, err := good.Encode()
	require.NoError(t, err)
	got, err := transport.DecodeSecuritySignal(value)
	require.NoError(t, err)
	require.Equal(t, good, got)

	base := strings.TrimSuffix(string(value), "}")
	for field, v := range map[string]string{
		"Detail":    base + `,"Detail":"x"}`,
		"reason":    base + `,"reason":"other"}`,
		"detail":    strings.Replace(string(value), `"consumed by`, `"\u001b]0;pwned\u0007consumed by`, 1),
		"worker_id": base + `,"worker_id":"w\u0000"}`,
		"body":      `null`,
	} {
		_, err := transport.DecodeSecuritySignal([]byte(v))
		require.ErrorIs(t, err, transport.ErrMalformedSignal, field)
		var m *transport.MalformedMessage
		require.True(t, errors.As(err, &m), field)
		if field == "body" {
			field = ""
		}
		require.Equal(t, field, m.Field, "%v", err)
	}
}

// TestWithMessageIDLeavesNonStrictValuesAlone: a value with a duplicate
// name is not rewritten (which of the two would the copy keep?): it is
// resubmitted as it was and dead-lettered again.
func TestWithMessageIDLeavesNonStrictValuesAlone(t *testing.T) {
	t.Parallel()
	dup := []byte(`{"message_id":"MSG-1","message_id":"MSG-2","operation_id":"OP-1","capability_id":"CAP-1"}`)
	require.Equal(t, dup, transport.WithMessageID(dup, "MSG-NEW"))
	require.Equal(t, []byte(`null`), transport.WithMessageID([]byte(`null`), "MSG-NEW"))
	out := transport.WithMessageID([]byte(validValue), "MSG-NEW")
	require.Equal(t, `{"capability_id":"CAP-1","correlation_id":"COR-1","message_id":"MSG-NEW","operation_id":"OP-1"}`, string(out))
}
