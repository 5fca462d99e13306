package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
	"opledger/eventstore"
)

type fakeWorker struct {
	res   worker.Result
	err   error
	calls int
}

func (f *fakeWorker) Handle(context.Context, worker.Delivery) (worker.Result, error) {
	f.calls++
	return f.res, f.err
}

type fakeEvidence struct {
	err      error
	recorded []domain.PresentationRejected
}

func (f *fakeEvidence) RecordUnattributed(_ context.Context, ev domain.PresentationRejected, _ ledger.Cause) error {
	if f.err != nil {
		return f.err
	}
	f.recorded = append(f.recorded, ev)
	return nil
}

func dispatcher(t *testing.T, w *fakeWorker, e *fakeEvidence) *transport.Dispatcher {
	t.Helper()
	d, err := transport.NewDispatcher(transport.DispatcherConfig{Worker: w, Evidence: e, WorkerID: "w1"})
	require.NoError(t, err)
	return d
}

var origin = transport.Origin{Transport: "kafka", Topic: transport.TopicRefundRequests, Partition: 2, Offset: 17}

func inbound(t *testing.T, r transport.RefundRequest) transport.Inbound {
	t.Helper()
	v, err := r.Encode()
	require.NoError(t, err)
	return transport.Inbound{Value: v, Origin: origin}
}

var valid = transport.RefundRequest{MessageID: "MSG-1", OperationID: "OP-1", CapabilityID: "CAP-1"}

func TestDispatcher(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("recorded results are acknowledged, refusals included", func(t *testing.T) {
		for _, s := range []domain.ClaimStatus{domain.StatusClaimed, domain.StatusDuplicateDelivery, domain.StatusAlreadyConsumed, domain.StatusExpired} {
			w := &fakeWorker{res: worker.Result{Claim: domain.ClaimResult{Status: s}}}
			d := dispatcher(t, w, &fakeEvidence{}).Handle(ctx, inbound(t, valid))
			require.Equal(t, transport.ActionAck, d.Action, s)
			require.True(t, d.Handled)
		}
	})
	t.Run("undecodable: evidence, then dead letter; the worker is not called", func(t *testing.T) {
		w, e := &fakeWorker{}, &fakeEvidence{}
		d := dispatcher(t, w, e).Handle(ctx, transport.Inbound{Value: []byte("{oops"), Origin: origin})
		require.Equal(t, transport.ActionDeadLetter, d.Action)
		require.Equal(t, transport.ReasonDeliveryMalformed, d.Reason)
		require.Zero(t, w.calls)
		require.Len(t, e.recorded, 1)
		require.Equal(t, transport.ReasonDeliveryMalformed, e.recorded[0].Reason)
		require.Equal(t, domain.MessageID(origin.String()), e.recorded[0].MessageID, "named by where it was read")
		require.False(t, e.recorded[0].ExecutionAttempted)
	})
	t.Run("refused as malformed by the ledger: evidence, dead letter", func(t *testing.T) {
		w, e := &fakeWorker{err: worker.ErrMalformedDelivery}, &fakeEvidence{}
		d := dispatcher(t, w, e).Handle(ctx, inbound(t, valid))
		require.Equal(t, transport.ActionDeadLetter, d.Action)
		require.Len(t, e.recorded, 1)
		require.Equal(t, domain.MessageID("MSG-1"), e.recorded[0].MessageID)
	})
	t.Run("evidence not recorded: retry, never dead-letter silently", func(t *testing.T) {
		e := &fakeEvidence{err: eventstore.ErrUnavailable}
		d := dispatcher(t, &fakeWorker{}, e).Handle(ctx, transport.Inbound{Value: []byte("{oops"), Origin: origin})
		require.Equal(t, transport.ActionRetry, d.Action)
		require.ErrorIs(t, d.Err, eventstore.ErrUnavailable)
	})
	t.Run("result not recorded: retry", func(t *testing.T) {
		w := &fakeWorker{err: errors.Join(eventstore.ErrUnavailable)}
		d := dispatcher(t, w, &fakeEvidence{}).Handle(ctx, inbound(t, valid))
		require.Equal(t, transport.ActionRetry, d.Action)
	})
	t.Run("unknown operation: dead letter (the ledger recorded the evidence)", func(t *testing.T) {
		w := &fakeWorker{res: worker.Result{Claim: domain.ClaimResult{Status: domain.StatusInvalid, Reason: domain.ReasonOperationUnknown}}}
		e := &fakeEvidence{}
		d := dispatcher(t, w, e).Handle(ctx, inbound(t, valid))
		require.Equal(t, transport.ActionDeadLetter, d.Action)
		require.Equal(t, domain.ReasonOperationUnknown, d.Reason)
		require.Empty(t, e.recorded)
	})
}
