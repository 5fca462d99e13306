package tracing_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"opledger/adapters/harness"
	"opledger/adapters/provider/sim"
	"opledger/adapters/tracing"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/worker"
	"opledger/eventstore/memory"
)

// secretLike is what a lease secret (43 base64url characters) or a signed
// token's part looks like.
var secretLike = regexp.MustCompile(`[A-Za-z0-9_-]{40,}`)

// spans indexes what the in-memory exporter holds.
type spans []tracetest.SpanStub

func (s spans) named(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	for _, sp := range s {
		if sp.Name == name {
			return sp
		}
	}
	names := make([]string, len(s))
	for i, sp := range s {
		names[i] = sp.Name
	}
	t.Fatalf("no span %q among %q", name, names)
	return tracetest.SpanStub{}
}

func attr(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	require.Equal(t, parent.SpanContext.SpanID(), child.Parent.SpanID(), "%q is a child of %q", child.Name, parent.Name)
	require.Equal(t, parent.SpanContext.TraceID(), child.SpanContext.TraceID(), "one trace")
}

// One refund is one story in spans: the agent's create and decide, the
// worker's claim, provider call and outcome (its response lost: Unknown),
// and the reconciler's round that settles it, each ledger command a child
// of its caller's span, carrying the correlation id, the operation and the
// execution; no secret in any of them.
func TestARefundInSpans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) })
	w, err := harness.New(harness.Options{Store: memory.New(nil), ClientAttempts: 1})
	require.NoError(t, err)
	t.Cleanup(w.Close)

	// Untraced callers make no spans: the ledger only joins a trace.
	_, err = w.Approve(ctx, "OP-0", "ORD-0", 100)
	require.NoError(t, err)
	require.Empty(t, exp.GetSpans())

	actx, agent := tp.Tracer("test").Start(ctx, "agent approves")
	r, err := w.Approve(actx, "OP-1", "ORD-1", 12_000)
	require.NoError(t, err)
	agent.End()

	require.NoError(t, w.Sim.Arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit, OperationID: "OP-1"}))
	wk, err := worker.New(worker.Config{ID: "worker-a", Ledger: w.Ledger, Provider: tracing.Provider(w.Provider, tp),
		Clock: w.Clock, Logger: w.Logger, After: w.WorkerTimers.After})
	require.NoError(t, err)
	res, err := tracing.Worker(wk, tp).Handle(ctx, r.Delivery("MSG-1"))
	require.NoError(t, err)
	require.Equal(t, domain.Unknown, res.Outcome)

	w.Clock.Advance(2 * time.Minute)
	rc, err := recovery.NewReconciler(recovery.ReconcilerConfig{Ledger: w.Ledger, Index: w.Index, Provider: tracing.Provider(w.Provider, tp),
		Profile: w.Profile, Logger: w.Logger, SetAside: w.SetAside})
	require.NoError(t, err)
	rctx, end := tracing.Round(ctx, tp, "reconcile round")
	steps, err := rc.ReconcileOnce(rctx)
	end(len(steps), err)
	require.NoError(t, err)
	require.Len(t, steps, 1)

	all := spans(exp.GetSpans())
	root := all.named(t, "agent approves")
	create, decide := all.named(t, "ledger OperationRequested"), all.named(t, "ledger Decided")
	childOf(t, create, root)
	childOf(t, decide, root)
	require.Equal(t, "COR-OP-1", attr(create, ledger.AttrCorrelationID))
	require.Equal(t, "COR-OP-1", attr(decide, ledger.AttrCorrelationID))
	require.Equal(t, "OP-1", attr(create, ledger.AttrOperationID))

	handle := all.named(t, "worker handle refund request")
	claim, call, outcome := all.named(t, "ledger Claimed"), all.named(t, "provider create refund"), all.named(t, "ledger OutcomeUnknown")
	for _, sp := range []tracetest.SpanStub{claim, call, outcome} {
		childOf(t, sp, handle)
		require.Equal(t, "OP-1", attr(sp, ledger.AttrOperationID), sp.Name)
	}
	require.Equal(t, "COR-OP-1", attr(handle, ledger.AttrCorrelationID))
	require.Equal(t, "COR-OP-1", attr(claim, ledger.AttrCorrelationID))
	exe := attr(claim, ledger.AttrExecutionID)
	require.NotEmpty(t, exe)
	require.Equal(t, exe, attr(handle, ledger.AttrExecutionID))
	require.Equal(t, exe, attr(outcome, ledger.AttrExecutionID))
	require.Equal(t, "refund-OP-1-a1", attr(call, tracing.AttrIdempotencyKey))
	require.Equal(t, "Unknown", attr(call, tracing.AttrOutcome))

	round := all.named(t, "reconcile round")
	lookup, settled := all.named(t, "provider look up by reference"), all.named(t, "ledger Reconciled")
	childOf(t, lookup, round)
	childOf(t, settled, round)
	require.Equal(t, "COR-OP-1", attr(settled, ledger.AttrCorrelationID))
	require.Equal(t, exe, attr(settled, ledger.AttrExecutionID))
	require.Equal(t, "1", attr(lookup, tracing.AttrEffects))

	for _, sp := range all {
		for _, kv := range sp.Attributes {
			key := strings.ToLower(string(kv.Key))
			require.False(t, strings.Contains(key, "secret") || strings.Contains(key, "token"), "%s carries %s", sp.Name, kv.Key)
			require.False(t, secretLike.MatchString(kv.Value.Emit()), "%s: %s=%s looks like a lease secret or a token", sp.Name, kv.Key, kv.Value.Emit())
		}
	}
}
