package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// Instrumentation name of the spans made here.
const tracerName = "opledger/adapters/tracing"

// Attribute keys beside the ledger's (ledger.Attr*).
const (
	AttrMessageID      = "opledger.message_id"
	AttrIdempotencyKey = "opledger.idempotency_key"
	AttrOutcome        = "opledger.outcome"
	AttrProviderRef    = "opledger.provider_reference"
	AttrEffects        = "opledger.effects"
	AttrWorkerID       = "opledger.worker_id"
)

// Provider wraps p: every call to the provider is a client span, a child
// of the caller's.
func Provider(p domain.Provider, tp trace.TracerProvider) domain.Provider {
	t := tp.Tracer(tracerName)
	return &tracedProvider{next: p, tracer: t, tracedReads: tracedReads{next: p, tracer: t, party: "provider"}}
}

type tracedProvider struct {
	next   domain.Provider
	tracer trace.Tracer
	tracedReads
}

func (p *tracedProvider) CreateRefund(ctx context.Context, req domain.RefundRequest) domain.RefundResult {
	ctx, span := p.tracer.Start(ctx, "provider create refund", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(ledger.AttrOperationID, string(req.OperationID)), attribute.String(AttrIdempotencyKey, string(req.IdempotencyKey))))
	defer span.End()
	res := p.next.CreateRefund(ctx, req)
	span.SetAttributes(attribute.String(AttrOutcome, string(res.Outcome)))
	if res.ProviderReference != "" {
		span.SetAttributes(attribute.String(AttrProviderRef, res.ProviderReference))
	}
	if res.Outcome == domain.Unknown {
		span.SetStatus(codes.Error, "outcome unknown")
	}
	return res
}

// Worker wraps w: every message is a consumer span, the parent of the
// claim, the provider call and the outcome it leads to.
func Worker(w transport.Worker, tp trace.TracerProvider) transport.Worker {
	return &tracedWorker{next: w, tracer: tp.Tracer(tracerName)}
}

type tracedWorker struct {
	next   transport.Worker
	tracer trace.Tracer
}

func (w *tracedWorker) Handle(ctx context.Context, d worker.Delivery) (worker.Result, error) {
	ctx, span := w.tracer.Start(ctx, "worker handle refund request", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String(ledger.AttrOperationID, string(d.OperationID)), attribute.String(ledger.AttrCorrelationID, string(d.CorrelationID)),
		attribute.String(AttrMessageID, string(d.MessageID))))
	defer span.End()
	res, err := w.next.Handle(ctx, d)
	span.SetAttributes(attribute.String("opledger.claim_status", string(res.Claim.Status)), attribute.Bool("opledger.executed", res.Executed))
	if res.Claim.ExecutionID != "" {
		span.SetAttributes(attribute.String(ledger.AttrExecutionID, string(res.Claim.ExecutionID)))
	}
	if res.Executed {
		span.SetAttributes(attribute.String(AttrOutcome, string(res.Outcome)))
	}
	fail(span, err)
	return res, err
}

// Round starts the span of one round of a background role (a reconciler
// round); end records its error and how many items it handled.
func Round(ctx context.Context, tp trace.TracerProvider, name string) (context.Context, func(items int, err error)) {
	ctx, span := tp.Tracer(tracerName).Start(ctx, name)
	return ctx, func(items int, err error) {
		span.SetAttributes(attribute.Int("opledger.items", items))
		fail(span, err)
		span.End()
	}
}

// fail marks span failed by err (a context ended is no failure of ours).
func fail(span trace.Span, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Exports wraps e: every call to the export-delivery service is a client
// span, a child of the caller's.
func Exports(e domain.ExportDeliverer, tp trace.TracerProvider) domain.ExportDeliverer {
	t := tp.Tracer(tracerName)
	return &tracedExports{next: e, tracer: t, tracedReads: tracedReads{next: e, tracer: t, party: "export"}}
}

type tracedExports struct {
	next   domain.ExportDeliverer
	tracer trace.Tracer
	tracedReads
}

func (e *tracedExports) DeliverExport(ctx context.Context, req domain.ExportDelivery) domain.EffectResult {
	ctx, span := e.tracer.Start(ctx, "export delivery", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(ledger.AttrOperationID, string(req.OperationID)), attribute.String(AttrIdempotencyKey, string(req.IdempotencyKey)),
		attribute.String("opledger.export_id", req.ExportID), attribute.Int("opledger.use", req.Use)))
	defer span.End()
	res := e.next.DeliverExport(ctx, req)
	span.SetAttributes(attribute.String(AttrOutcome, string(res.Outcome)))
	if res.Outcome == domain.Unknown {
		span.SetStatus(codes.Error, "outcome unknown")
	}
	return res
}

// effectReads are the reads reconciliation asks a provider and the
// export-delivery service alike.
type effectReads interface {
	LookupByReference(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error)
	RetrieveByKey(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error)
}

// tracedReads makes each read a client span named after party.
type tracedReads struct {
	next   effectReads
	tracer trace.Tracer
	party  string // "provider", "export"
}

func (r tracedReads) LookupByReference(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error) {
	ctx, span := r.tracer.Start(ctx, r.party+" look up by reference", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(ledger.AttrOperationID, string(op))))
	defer span.End()
	effects, err := r.next.LookupByReference(ctx, op)
	span.SetAttributes(attribute.Int(AttrEffects, len(effects)))
	fail(span, err)
	return effects, err
}

func (r tracedReads) RetrieveByKey(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	ctx, span := r.tracer.Start(ctx, r.party+" retrieve by key", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(AttrIdempotencyKey, string(key))))
	defer span.End()
	effect, found, err := r.next.RetrieveByKey(ctx, key)
	if found {
		span.SetAttributes(attribute.String(ledger.AttrOperationID, string(effect.OperationID)), attribute.String(AttrProviderRef, effect.Reference))
	}
	span.SetAttributes(attribute.Int(AttrEffects, boolInt(found)))
	fail(span, err)
	return effect, found, err
}
