package transport_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
)

func TestDecodeRefundRequest(t *testing.T) {
	t.Parallel()
	good := transport.RefundRequest{MessageID: "MSG-55A", CorrelationID: "COR-2210", OperationID: "OP-4471", CapabilityID: "CAP-91F"}
	value, err := good.Encode()
	require.NoError(t, err)
	got, err := transport.DecodeRefundRequest(value)
	require.NoError(t, err)
	require.Equal(t, good, got)
	require.Equal(t, domain.MessageID("MSG-55A"), got.Delivery().MessageID)

	withToken := `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","capability_token":"v1.abc"}`
	got, err = transport.DecodeRefundRequest([]byte(withToken))
	require.NoError(t, err)
	require.Equal(t, "v1.abc", got.CapabilityToken)

	for name, value := range map[string]string{
		"not json":          `{not json`,
		"not an object":     `[1,2]`,
		"trailing data":     `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1"} {}`,
		"unknown field":     `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP-1","amount":12000}`,
		"no message id":     `{"operation_id":"OP-1","capability_id":"CAP-1"}`,
		"no operation":      `{"message_id":"MSG-1","capability_id":"CAP-1"}`,
		"no capability":     `{"message_id":"MSG-1","operation_id":"OP-1"}`,
		"malformed op":      `{"message_id":"MSG-1","operation_id":"4471","capability_id":"CAP-1"}`,
		"malformed cap":     `{"message_id":"MSG-1","operation_id":"OP-1","capability_id":"CAP 1"}`,
		"spaces in message": `{"message_id":"MSG 1","operation_id":"OP-1","capability_id":"CAP-1"}`,
		"too large":         `{"message_id":"` + strings.Repeat("M", transport.MaxMessageBytes) + `"}`,
	} {
		_, err := transport.DecodeRefundRequest([]byte(value))
		require.ErrorIs(t, err, transport.ErrMalformed, name)
	}
}

func TestWithMessageIDKeepsEveryOtherField(t *testing.T) {
	t.Parallel()
	in := []byte(`{"message_id":"MSG-55A","operation_id":"OP-4471","capability_id":"CAP-91F","capability_token":"tok"}`)
	out := transport.WithMessageID(in, "MSG-NEW")
	var got map[string]string
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, map[string]string{"message_id": "MSG-NEW", "operation_id": "OP-4471", "capability_id": "CAP-91F", "capability_token": "tok"}, got)
	require.Equal(t, []byte("\x00junk"), transport.WithMessageID([]byte("\x00junk"), "MSG-NEW"), "not an object: unchanged")
}

func TestIDsAreStableAndDistinct(t *testing.T) {
	t.Parallel()
	a := transport.MessageIDForEvent("0190-event-a")
	require.Equal(t, a, transport.MessageIDForEvent("0190-event-a"))
	require.NotEqual(t, a, transport.MessageIDForEvent("0190-event-b"))
	_, err := domain.ParseMessageID(string(a))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(a), "MSG-"))

	r := transport.ResubmissionMessageID("DL-0-7")
	require.Equal(t, r, transport.ResubmissionMessageID("DL-0-7"))
	require.NotEqual(t, r, transport.ResubmissionMessageID("DL-0-8"))
	require.NotEqual(t, string(a), string(transport.ResubmissionMessageID("0190-event-a")), "a resubmission never reuses a relay's id")
	require.NotEqual(t, transport.SignalIDForEvent("e"), string(transport.MessageIDForEvent("e")))
}

func TestResubmissionHeaders(t *testing.T) {
	t.Parallel()
	h := transport.ResubmissionHeaders(map[string]string{
		transport.HeaderMessageID: "MSG-OLD", transport.HeaderCorrelationID: "COR-1",
		transport.HeaderDeadReason: "x", transport.HeaderOriginalOffset: "3",
	}, "DL-0-1", "MSG-OLD", "MSG-NEW")
	require.Equal(t, map[string]string{
		transport.HeaderMessageID: "MSG-NEW", transport.HeaderCorrelationID: "COR-1",
		transport.HeaderResubmittedFrom: "DL-0-1", transport.HeaderPreviousMessage: "MSG-OLD",
	}, h)
}
