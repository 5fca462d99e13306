package audit_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// The provider's export of the story, as the simulator writes it (one
// ExportedRefund per line), with a field this build does not know.
const cleanExport = `{"id":"re_sim00000001","operation_id":"OP-4471","idempotency_key":"refund-OP-4471-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":1795701743,"livemode":false}
{"id":"re_sim00000002","operation_id":"OP-5001","idempotency_key":"refund-OP-5001-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":1795702330}
{"id":"re_sim00000003","operation_id":"OP-5002","idempotency_key":"refund-OP-5002-a2","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":1795702930}

{"id":"re_sim00000005","operation_id":"OP-5005","idempotency_key":"refund-OP-5005-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":1795704530}
`

func TestProviderDiffAgreesWithTheStory(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		n := newStory(t, store).write()
		waitVisible(t, store, n)
		d, err := audit.ProviderDiff(context.Background(), store, provider.StripeExport(strings.NewReader(cleanExport)))
		require.NoError(t, err)
		require.True(t, d.OK(), "%+v", d)
		require.Equal(t, int64(4), d.ProviderRefunds)
		require.Equal(t, int64(4), d.LedgerCompleted)
		require.Equal(t, int64(4), d.Matched)
		require.Equal(t, n, d.LedgerEvents)
	})
}

func TestProviderDiffFindsEachDisagreement(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		n := newStory(t, store).write()
		waitVisible(t, store, n)
		export := strings.Join([]string{
			// OP-4471 as the ledger has it.
			`{"id":"re_sim00000001","operation_id":"OP-4471","idempotency_key":"refund-OP-4471-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":1}`,
			// OP-5001's refund is missing; a different refund of OP-5001 is there: a second effect.
			`{"id":"re_sim00000007","operation_id":"OP-5001","idempotency_key":"refund-OP-5001-a9","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":2}`,
			// OP-5002's attempt 2 with another amount; its failed attempt 1 is not a refund that took effect.
			`{"id":"re_sim00000003","operation_id":"OP-5002","idempotency_key":"refund-OP-5002-a2","amount":1200,"currency":"eur","order":"ORD-8841","status":"succeeded","created":3}`,
			`{"id":"re_sim00000008","operation_id":"OP-5002","idempotency_key":"refund-OP-5002-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"failed","created":3}`,
			// OP-5003 is still Unknown in the ledger: the refund happened.
			`{"id":"re_sim00000006","operation_id":"OP-5003","idempotency_key":"refund-OP-5003-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":4}`,
			// OP-5005 as the ledger has it; OP-9999 the ledger never heard of.
			`{"id":"re_sim00000005","operation_id":"OP-5005","idempotency_key":"refund-OP-5005-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":5}`,
			`{"id":"re_sim00000009","operation_id":"OP-9999","idempotency_key":"refund-OP-9999-a1","amount":500,"currency":"eur","order":"ORD-1","status":"succeeded","created":6}`,
		}, "\n")
		d, err := audit.ProviderDiff(context.Background(), store, provider.StripeExport(strings.NewReader(export)))
		require.NoError(t, err)
		require.False(t, d.OK())

		require.Equal(t, int64(3), d.UnknownToLedgerCount)
		require.Equal(t, "re_sim00000007", d.UnknownToLedger[0].RefundID)
		require.Equal(t, int64(2), d.UnknownToLedger[0].Line)
		require.Contains(t, d.UnknownToLedger[0].Why, "a second refund")
		require.Equal(t, "re_sim00000006", d.UnknownToLedger[1].RefundID)
		require.Contains(t, d.UnknownToLedger[1].Why, "1 Unknown")
		require.Equal(t, "re_sim00000009", d.UnknownToLedger[2].RefundID)
		require.Contains(t, d.UnknownToLedger[2].Why, "no operation OP-9999")

		require.Equal(t, int64(1), d.UnknownToProviderCount)
		require.Equal(t, "re_sim00000002", d.UnknownToProvider[0].ProviderReference)
		require.EqualValues(t, "OP-5001", d.UnknownToProvider[0].Operation)
		require.EqualValues(t, "EXE-5001", d.UnknownToProvider[0].Execution)
		require.NotEmpty(t, d.UnknownToProvider[0].Position)

		require.Equal(t, int64(1), d.MismatchCount)
		require.Equal(t, "re_sim00000003", d.Mismatches[0].RefundID)
		require.Contains(t, d.Mismatches[0].Message, "12.00 eur")

		var text, js bytes.Buffer
		require.NoError(t, d.WriteText(&text))
		require.Contains(t, text.String(), "DIFFERENT: 3 refunds unknown to the ledger, 1 completions unknown to the provider, 1 mismatches")
		require.NoError(t, d.WriteJSON(&js))
		require.Contains(t, js.String(), `"unknown_to_ledger_count": 3`)
	})
}

// The diff's own rules on the records a reader gives it (the readers'
// strictness is tested with them, adapters/provider): a reference given
// twice, a record without a reference or a valid state, each naming its
// line; and a reader's refusal goes through unchanged.
func TestProviderDiffRefusesMalformedRecords(t *testing.T) {
	store := newMemoryStore()
	applied := func(line int64, ref string) audit.ProviderRecord {
		return audit.ProviderRecord{Line: line, Reference: ref, State: domain.EffectApplied, Status: "ok"}
	}
	for _, c := range []struct {
		records []audit.ProviderRecord
		want    string
	}{
		{[]audit.ProviderRecord{applied(1, "re_1"), applied(2, "re_1")}, "line 2: refund re_1 already on line 1"},
		{[]audit.ProviderRecord{applied(4, "")}, "line 4: refund without a reference"},
		{[]audit.ProviderRecord{{Line: 5, Reference: "re_5", Status: "succeeded"}}, "line 5: refund re_5 without a state"},
	} {
		_, err := audit.ProviderDiff(context.Background(), store, recordList(c.records))
		require.ErrorIs(t, err, audit.ErrMalformedExport, c.want)
		require.ErrorContains(t, err, c.want)
	}
	_, err := audit.ProviderDiff(context.Background(), store, provider.StripeExport(strings.NewReader("{\"status\":\"succeeded\"}\n")))
	require.ErrorIs(t, err, audit.ErrMalformedExport)
	require.ErrorContains(t, err, "line 1: refund without an id")
}

// recordList is an export already read.
type recordList []audit.ProviderRecord

func (l recordList) Records(each func(audit.ProviderRecord) error) error {
	for _, r := range l {
		if err := each(r); err != nil {
			return err
		}
	}
	return nil
}

// TestProviderDiffLeavesExportDownloadsOut: an export download's completed
// uses are deliveries of the export-delivery service, not refunds: the
// payment provider's export does not show them, and that is no
// disagreement.
func TestProviderDiffLeavesExportDownloadsOut(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		n := newStory(t, store).write()
		h := newHistory(t, store, "OP-DL")
		h.startExport()
		h.use(1, domain.Completed)
		h.use(2, domain.Completed)
		waitVisible(t, store, n+h.next)
		d, err := audit.ProviderDiff(context.Background(), store, provider.StripeExport(strings.NewReader(cleanExport)))
		require.NoError(t, err)
		require.True(t, d.OK(), "%+v", d)
		require.Equal(t, int64(4), d.LedgerCompleted, "the refunds' completions only")
	})
}
