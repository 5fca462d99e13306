package provider_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/audit"
)

const meridianHeader = "refund_request_id,request_id,merchant_reference,merchant_order,amount_value,currency,status,created_at\n"

func TestMeridianExportRecords(t *testing.T) {
	got, err := records(provider.MeridianExport(strings.NewReader(meridianHeader +
		"mrr_1,refund-OP-1-a1,OP-1,ORD-1,12000,EUR,COMPLETED,2026-11-26T14:02:13Z\n" +
		"\n" +
		"mrr_2,refund-OP-2-a1,OP-2,\"ORD, 2\",500,EUR,DECLINED,2026-11-26T14:02:14Z\n" +
		"mrr_3,,,,7,eur,PROCESSING,2026-11-26T14:02:15+01:00\n")))
	require.NoError(t, err)
	require.Equal(t, []audit.ProviderRecord{
		{Line: 2, Reference: "mrr_1", OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", AmountMinor: 12000, Currency: "EUR",
			State: domain.EffectApplied, Status: "COMPLETED"},
		{Line: 4, Reference: "mrr_2", OperationID: "OP-2", IdempotencyKey: "refund-OP-2-a1", AmountMinor: 500, Currency: "EUR",
			State: domain.EffectNotApplied, Status: "DECLINED"},
		{Line: 5, Reference: "mrr_3", AmountMinor: 7, Currency: "eur", State: domain.EffectInProgress, Status: "PROCESSING"},
	}, got)
}

// Strict: the header exactly, the columns exactly, each value checked; a
// refusal names the line and the column.
func TestMeridianExportIsReadStrictly(t *testing.T) {
	const ok = "mrr_1,refund-OP-1-a1,OP-1,ORD-1,12000,EUR,COMPLETED,2026-11-26T14:02:13Z\n"
	for _, c := range []struct{ name, export, want string }{
		{"empty", "", "line 1: empty report"},
		{"no header", ok, `line 1: header column 1 is "mrr_1", want "refund_request_id"`},
		{"header reordered", strings.Replace(meridianHeader, "request_id,merchant_reference", "merchant_reference,request_id", 1) + ok, "line 1: header column 2"},
		{"header case", strings.ToUpper(meridianHeader) + ok, "line 1: header column 1"},
		{"extra column", meridianHeader + strings.TrimSuffix(ok, "\n") + ",x\n", "line 2: wrong number of fields"},
		{"missing column", meridianHeader + "mrr_1,k,OP-1,ORD-1,12000,EUR,COMPLETED\n", "line 2: wrong number of fields"},
		{"no id", meridianHeader + ",k,OP-1,ORD-1,12000,EUR,COMPLETED,2026-11-26T14:02:13Z\n", "line 2: column refund_request_id: required"},
		{"amount not an integer", meridianHeader + "mrr_1,k,OP-1,ORD-1,120.00,EUR,COMPLETED,2026-11-26T14:02:13Z\n", `line 2: column amount_value: "120.00"`},
		{"amount zero", meridianHeader + "mrr_1,k,OP-1,ORD-1,0,EUR,COMPLETED,2026-11-26T14:02:13Z\n", "line 2: column amount_value"},
		{"bad currency", meridianHeader + "mrr_1,k,OP-1,ORD-1,5,EU,COMPLETED,2026-11-26T14:02:13Z\n", "line 2: column currency"},
		{"undocumented status", meridianHeader + "mrr_1,k,OP-1,ORD-1,5,EUR,succeeded,2026-11-26T14:02:13Z\n", `line 2: column status: "succeeded" is not COMPLETED`},
		{"bad time", meridianHeader + "mrr_1,k,OP-1,ORD-1,5,EUR,COMPLETED,26/11/2026\n", "line 2: column created_at"},
		{"NUL in id", meridianHeader + "mrr_\x00,k,OP-1,ORD-1,5,EUR,COMPLETED,2026-11-26T14:02:13Z\n", "line 2: field refund_request_id:"},
		{"ESC in reference", meridianHeader + "mrr_1,k,OP-\x1b[2J,ORD-1,5,EUR,COMPLETED,2026-11-26T14:02:13Z\n", "line 2: field merchant_reference:"},
		{"bare quote", meridianHeader + "mrr_1,k,OP-\"1,ORD-1,5,EUR,COMPLETED,2026-11-26T14:02:13Z\n", "line 2:"},
		{"third line", meridianHeader + ok + "mrr_2,k,OP-2,ORD-1,5,EUR,REFUNDED,2026-11-26T14:02:13Z\n", "line 3: column status"},
		{"line too long", meridianHeader + strings.Repeat("x", provider.MaxExportLine+1) + "\n", "line 2: line too long"},
	} {
		_, err := records(provider.MeridianExport(strings.NewReader(c.export)))
		require.ErrorIs(t, err, audit.ErrMalformedExport, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "\x00", c.name)
		require.NotContains(t, err.Error(), "\x1b", c.name)
	}
}

// The simulator's export of each provider is read back by that provider's
// reader, and only by it: the formats differ.
func TestEachExportReaderReadsItsSimulatorsExport(t *testing.T) {
	for _, profile := range []sim.Profile{sim.ProfileStripeV1, sim.ProfileStripeV2, sim.ProfileMeridian} {
		t.Run(string(profile), func(t *testing.T) {
			e := newEnv(t, profile)
			created := e.client().CreateRefund(t.Context(), refundRequest("OP-1"))
			require.Equal(t, domain.Completed, created.Outcome)
			e.arm(sim.Fault{Kind: sim.FaultDecline})
			declined := e.client().CreateRefund(t.Context(), refundRequest("OP-2"))
			require.Equal(t, domain.NotApplied, declined.Outcome)
			var buf bytes.Buffer
			require.NoError(t, e.sim.WriteLedgerExport(&buf))

			x, err := provider.ExportReader(string(profile), bytes.NewReader(buf.Bytes()))
			require.NoError(t, err)
			got, err := records(x)
			require.NoError(t, err)
			require.Len(t, got, 2)
			require.Equal(t, created.ProviderReference, got[0].Reference)
			require.Equal(t, "OP-1", got[0].OperationID)
			require.Equal(t, "refund-OP-1-a1", got[0].IdempotencyKey)
			require.Equal(t, int64(12000), got[0].AmountMinor)
			require.Equal(t, domain.EffectApplied, got[0].State)
			require.Equal(t, domain.EffectNotApplied, got[1].State)

			other := "meridian"
			if profile == sim.ProfileMeridian {
				other = "stripe"
			}
			x, err = provider.ExportReader(other, bytes.NewReader(buf.Bytes()))
			require.NoError(t, err)
			_, err = records(x)
			require.ErrorIs(t, err, audit.ErrMalformedExport, "the other provider's reader refuses it")
		})
	}
	_, err := provider.ExportReader("adyen", strings.NewReader(""))
	require.ErrorContains(t, err, "no export reader")
}
