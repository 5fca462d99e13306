package transport_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// TestAnExportDownloadsCapabilityIsNotPublished: a refund's capability is
// published once, to be executed; an export download's is not, for each of
// its uses is presented by its holder when a download is asked for.
func TestAnExportDownloadsCapabilityIsNotPublished(t *testing.T) {
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(now.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: now})
	require.NoError(t, err)
	ctx := t.Context()
	refund := approve(t, h, "OP-1")
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-2", Kind: domain.KindExportDownload, ExportID: "EXP-1", CorrelationID: "COR-2"}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	_, export, err := h.DecideAndIssue(ctx, "OP-2", domain.Decide{Approver: "a", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: 3}, domain.IssueCapability{}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	require.Equal(t, 3, export.Uses)

	recs, err := store.ReadAll(ctx, nil, 100)
	require.NoError(t, err)
	var published []domain.CapabilityID
	for _, rec := range recs {
		out, err := transport.SelectRefundRequests(t.Context(), rec)
		require.NoError(t, err)
		for _, o := range out {
			req, err := transport.DecodeRefundRequest(o.Value)
			require.NoError(t, err)
			published = append(published, req.CapabilityID)
		}
	}
	require.Equal(t, []domain.CapabilityID{refund.CapabilityID}, published)
}

// TestALogRegressionRaisesASecuritySignal: every LogRegressed a process
// records is published as a signal of kind log-regressed, naming the
// operation whose stream went back and the process that noticed, readable
// by the signals' strict decoder (opledger dlq signals prints them).
func TestALogRegressionRaisesASecuritySignal(t *testing.T) {
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(now.Now)
	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: store, Noticer: "worker-2", Clock: now, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rec.ObserveRegression(t.Context(), eventstore.Regression{Cache: domain.CacheWorker, Stream: "operation-OP-7", SeenVersion: 5, HeldVersion: 3,
		Detail: "went back \x1b[31m"})
	recs, err := store.ReadAll(t.Context(), nil, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	out, err := transport.SelectSecuritySignals(t.Context(), recs[0])
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, transport.TopicSecuritySignals, out[0].Topic)
	require.Equal(t, "operation-OP-7", out[0].Key)
	sig, err := transport.DecodeSecuritySignal(out[0].Value)
	require.NoError(t, err)
	require.Equal(t, transport.SignalLogRegressed, sig.Kind)
	require.Equal(t, domain.OperationID("OP-7"), sig.OperationID)
	require.Equal(t, "worker-2", sig.WorkerID)
	require.Equal(t, transport.ReasonLogRegressed, sig.Reason)
	require.Equal(t, transport.SignalIDForEvent(recs[0].ID), sig.SignalID)
	require.Contains(t, sig.Detail, "worker_cache of worker-2 saw operation-OP-7 at version 5, the store holds version 3")
}
