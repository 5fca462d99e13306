package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/ledger"
)

// Every request is a server span named by its route, a child of the
// caller's when it sends a traceparent; the ledger's command is the
// request's child and names the correlation id; a claim's span names the
// execution. No token, capability or lease secret is in any span.
func TestRequestsAreTraced(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.WithoutCancel(t.Context())) })
	e := newEnv(t, func(c *httpapi.Config) { c.Tracing = tp })

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent := "00-" + traceID + "-00f067aa0ba902b7-01"
	r := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-T1"),
		"Idempotency-Key", "trace-1", "Traceparent", parent))
	op := r.str("operation_id")
	corr := r.str("correlation_id")
	require.NotEmpty(t, corr)
	_, token := e.allow(domain.OperationID(op))
	claim := e.must(http.StatusOK, e.claim(domain.OperationID(op), "MSG-T1", token))
	secret := claim.str("lease_secret")

	var server, create, decided, claimed tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		switch sp.Name {
		case "POST /v1/operations":
			server = sp
		case "ledger OperationRequested":
			create = sp
		case "ledger Decided":
			decided = sp
		case "ledger Claimed":
			claimed = sp
		}
		for _, kv := range sp.Attributes {
			v := kv.Value.Emit()
			require.False(t, strings.Contains(v, token) || strings.Contains(v, secret) || strings.Contains(v, "token-0123456789"),
				"%s: %s carries a secret", sp.Name, kv.Key)
		}
	}
	require.Equal(t, trace.SpanKindServer, server.SpanKind)
	require.Equal(t, traceID, server.SpanContext.TraceID().String(), "the caller's trace")
	require.Equal(t, "00f067aa0ba902b7", server.Parent.SpanID().String())
	require.Equal(t, server.SpanContext.SpanID(), create.Parent.SpanID(), "the ledger's span is the request's child")
	require.Equal(t, corr, value(create, ledger.AttrCorrelationID))
	require.Equal(t, op, value(create, ledger.AttrOperationID))
	require.Equal(t, "201", value(server, "http.response.status_code"))
	require.Equal(t, corr, value(decided, ledger.AttrCorrelationID))
	require.Equal(t, claim.str("execution_id"), value(claimed, ledger.AttrExecutionID))
	require.Equal(t, corr, value(claimed, ledger.AttrCorrelationID))
}

func value(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
