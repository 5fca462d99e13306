package httpapi

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"opledger/domain/ledger"
)

// Traces: every request is a server span named by its route ("POST
// /v1/claims"), a child of the caller's span when the request carries a
// W3C traceparent header; the ledger's span of the command (domain/ledger)
// is its child and names the correlation id. The span records the route's
// id, the caller's role and the status, never a token or a body.

const tracerName = "opledger/adapters/httpapi"

var traceContext = propagation.TraceContext{}

func (s *Server) startSpan(r *http.Request, pattern string) (*http.Request, trace.Span) {
	name := pattern
	if name == "" {
		name = r.Method + " unmatched"
	}
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.cfg.Tracing.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", pattern)))
	return r.WithContext(ctx), span
}

// annotateSpan records what the route's {id} names and who called.
func annotateSpan(r *http.Request, who Principal) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("opledger.role", string(who.Role)))
	id := r.PathValue("id")
	switch {
	case id == "":
	case len(id) > 3 && id[:3] == "OP-":
		span.SetAttributes(attribute.String(ledger.AttrOperationID, id))
	case len(id) > 4 && id[:4] == "EXE-":
		span.SetAttributes(attribute.String(ledger.AttrExecutionID, id))
	default:
		span.SetAttributes(attribute.String("opledger.id", id))
	}
}

func endSpan(span trace.Span, rec *statusRecorder, info *requestInfo) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("opledger.request_id", info.id))
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
}
