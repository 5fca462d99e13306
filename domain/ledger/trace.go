package ledger

import (
	"cmp"
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"opledger/domain"
)

// Traces. Execute opens a span for every command it runs, as a child of the
// caller's span, and only when the caller traces (its context carries a
// recording span; otherwise nothing is done, at the cost of one check). It
// uses the OpenTelemetry API alone, which like log/slog is an interface with
// a no-op default and no I/O: the SDK and the exporter are the binary's
// (cmd/opledger), never the domain's. The span carries the operation, its
// correlation id, the execution the events name and the events decided (or
// the refusal), never a secret.

// Span attribute keys, shared by every span opledger makes.
const (
	AttrOperationID   = "opledger.operation_id"
	AttrCorrelationID = "opledger.correlation_id"
	AttrExecutionID   = "opledger.execution_id"
	AttrEvents        = "opledger.events"
	AttrRefusal       = "opledger.refusal"
)

const tracerName = "opledger/domain/ledger"

// commandSpan is Execute's span; the zero value (the caller does not
// trace) does nothing.
type commandSpan struct{ span trace.Span }

func startSpan(ctx context.Context, op domain.OperationID, by Cause) (context.Context, commandSpan) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, commandSpan{}
	}
	attrs := []attribute.KeyValue{attribute.String(AttrOperationID, string(op))}
	if by.CorrelationID != "" {
		attrs = append(attrs, attribute.String(AttrCorrelationID, string(by.CorrelationID)))
	}
	ctx, s := parent.TracerProvider().Tracer(tracerName).Start(ctx, "ledger", trace.WithAttributes(attrs...))
	return ctx, commandSpan{s}
}

// End ends the span.
func (c commandSpan) End() {
	if c.span != nil {
		c.span.End()
	}
}

// observe wraps decide to name the span after what was decided ("ledger
// Claimed", "ledger refused") and to record the correlation id, the
// execution and the events; the last decision (after a version conflict,
// the one appended) is what the span shows.
func (c commandSpan) observe(by Cause, decide Decision) Decision {
	if c.span == nil {
		return decide
	}
	return func(state *domain.Operation, now time.Time) ([]domain.Event, error) {
		events, err := decide(state, now)
		name := "ledger no change"
		types := make([]string, len(events))
		for i, e := range events {
			types[i] = e.EventType()
		}
		if len(types) > 0 {
			name = "ledger " + types[0]
		}
		attrs := []attribute.KeyValue{attribute.StringSlice(AttrEvents, types)}
		if corr := cmp.Or(by.CorrelationID, state.CorrelationID); corr != "" {
			attrs = append(attrs, attribute.String(AttrCorrelationID, string(corr)))
		}
		if x := executionOf(events); x != "" {
			attrs = append(attrs, attribute.String(AttrExecutionID, string(x)))
		}
		var r *domain.Refusal
		if errors.As(err, &r) {
			attrs = append(attrs, attribute.String(AttrRefusal, string(r.Reason)))
			if len(events) == 0 {
				name = "ledger refused"
			}
		}
		c.span.SetName(name)
		c.span.SetAttributes(attrs...)
		return events, err
	}
}

// executionOf is the execution the events name, if any.
func executionOf(events []domain.Event) domain.ExecutionID {
	for _, e := range events {
		switch e := e.(type) {
		case domain.Claimed:
			return e.ExecutionID
		case domain.OutcomeRecorded:
			return e.ExecutionID
		case domain.OutcomeUnknown:
			return e.ExecutionID
		case domain.LeaseLapsed:
			return e.ExecutionID
		case domain.LeaseRenewed:
			return e.ExecutionID
		case domain.LateOutcomeRecorded:
			return e.ExecutionID
		case domain.Reconciled:
			return e.ExecutionID
		case domain.Escalated:
			return e.ExecutionID
		}
	}
	return ""
}
