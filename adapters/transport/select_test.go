package transport_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
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
