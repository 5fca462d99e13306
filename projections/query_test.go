package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/projections"
)

// TestReadsOperations: the query API lists, filters, searches and pages
// operations over a history touching every state.
func TestReadsOperations(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	e.world()
	e.catchUp()
	reads, err := projections.NewReads(e.pool, e.schema)
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, reads.Ping(ctx))

	ids := func(p projections.OperationPage) []string {
		var out []string
		for _, o := range p.Operations {
			out = append(out, o.ID)
		}
		return out
	}
	all, err := reads.ListOperations(ctx, projections.OperationQuery{})
	require.NoError(t, err)
	require.Nil(t, all.Next)
	// Newest first: OP-A was created a second before the rest, which tie on
	// created_at and come by id, descending (the export downloads OP-X and
	// OP-Y among them).
	require.Equal(t, []string{"OP-Y", "OP-X", "OP-H", "OP-G", "OP-F", "OP-E", "OP-D", "OP-C", "OP-B", "OP-A"}, ids(all))

	// Keyset pages of three cover the same list, without repeats.
	var paged []string
	var after *projections.TimeCursor
	for range 10 { // bound: 10 operations, 3 a page
		p, err := reads.ListOperations(ctx, projections.OperationQuery{Limit: 3, After: after})
		require.NoError(t, err)
		paged = append(paged, ids(p)...)
		if p.Next == nil {
			break
		}
		c, ok := projections.ParseTimeCursor(p.Next.String(), nil)
		require.True(t, ok, "a cursor reads back")
		after = &c
	}
	require.Equal(t, ids(all), paged)

	byState, err := reads.ListOperations(ctx, projections.OperationQuery{States: []string{"Escalated", "Completed"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"OP-A", "OP-B", "OP-C", "OP-G"}, ids(byState))

	replay, err := reads.ListOperations(ctx, projections.OperationQuery{ReplaySuspected: true})
	require.NoError(t, err)
	require.Equal(t, []string{"OP-Y", "OP-A"}, ids(replay), "OP-Y: its one use presented again")

	exports, err := reads.ListOperations(ctx, projections.OperationQuery{Search: "EXE-X.2"})
	require.NoError(t, err)
	require.Len(t, exports.Operations, 1)
	x := exports.Operations[0]
	require.Equal(t, []any{"OP-X", "export-download", "EXP-OP-X", 1, int64(0), "", ""},
		[]any{x.ID, x.Kind, *x.ExportID, x.UsesLeft, x.AmountMinor, x.Currency, x.OrderID}, "an export download reads with its export and uses left, no refund fields")
	uses, err := reads.ExecutionsOf(ctx, "OP-X")
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, []int{uses[0].Use, uses[1].Use})
	xcaps, err := reads.CapabilitiesOf(ctx, "OP-X")
	require.NoError(t, err)
	require.Equal(t, []int{3, 2, 1}, []int{xcaps[0].Uses, xcaps[0].UsesClaimed, xcaps[0].UsesLeft})

	young, err := reads.ListOperations(ctx, projections.OperationQuery{CreatedBefore: start.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, []string{"OP-A"}, ids(young), "created before the second tick")

	for term, want := range map[string]string{
		"OP-C": "OP-C", "ORD-OP-D": "OP-D", "COR-OP-B": "OP-B", "MSG-A2": "OP-A", "EXE-G.1": "OP-G",
	} {
		got, err := reads.ListOperations(ctx, projections.OperationQuery{Search: term})
		require.NoError(t, err)
		require.Equal(t, []string{want}, ids(got), "search %s", term)
	}
	caps, err := reads.CapabilitiesOf(ctx, "OP-F")
	require.NoError(t, err)
	require.Len(t, caps, 2)
	got, err := reads.ListOperations(ctx, projections.OperationQuery{Search: caps[1].ID})
	require.NoError(t, err)
	require.Equal(t, []string{"OP-F"}, ids(got), "search by capability id")
	none, err := reads.ListOperations(ctx, projections.OperationQuery{Search: "NOTHING-HERE"})
	require.NoError(t, err)
	require.Empty(t, none.Operations)
	_, err = reads.ListOperations(ctx, projections.OperationQuery{Search: string(make([]byte, projections.MaxSearchLength+1))})
	require.ErrorContains(t, err, "search term longer")

	// Capabilities: revoked, and expired by the ledger's clock (not stored).
	require.Equal(t, "Revoked", caps[0].StateAt(e.clock.Now()))
	require.Equal(t, "Issued", caps[1].State)
	require.Equal(t, "Expired", caps[1].StateAt(e.clock.Now()))
	require.Equal(t, "Issued", caps[1].StateAt(caps[1].IssuedAt))

	op, found, err := reads.Operation(ctx, "OP-C")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "Escalated", op.State)
	require.Equal(t, "ORD-OP-C", op.OrderID)
	_, found, err = reads.Operation(ctx, "OP-NOPE")
	require.NoError(t, err)
	require.False(t, found)

	xs, err := reads.ExecutionsOf(ctx, "OP-D")
	require.NoError(t, err)
	require.Len(t, xs, 2)
	require.Equal(t, "NotApplied", xs[0].State)
	require.Equal(t, "Executing", xs[1].State)
	require.Equal(t, 2, xs[1].Attempt)

	ds, err := reads.DeliveriesOf(ctx, "OP-A")
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	rs, err := reads.ReconciliationsOf(ctx, "OP-B")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, "Reconciled", rs[0].Kind)

	attention, err := reads.Attention(ctx)
	require.NoError(t, err)
	require.Equal(t, projections.Attention{EscalatedExecutions: 1, ReplaySignals: 2}, attention) // OP-A's and OP-Y's
}

// TestReadsEscalationsAndEvidence: the escalation queue with its evidence,
// and evidence filtered and paged both ways.
func TestReadsEscalationsAndEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	e.world()
	e.catchUp()
	reads, err := projections.NewReads(e.pool, e.schema)
	require.NoError(t, err)
	ctx := t.Context()

	esc, err := reads.ListEscalations(ctx, nil, 10)
	require.NoError(t, err)
	require.Len(t, esc.Escalations, 1)
	x := esc.Escalations[0]
	require.Equal(t, "OP-C", x.OperationID)
	require.Equal(t, "ORD-OP-C", x.OrderID)
	require.EqualValues(t, 7_000, x.AmountMinor)
	require.Equal(t, "refund", x.Kind)
	require.Nil(t, x.ExportID)
	require.NotNil(t, x.EscalatedAt)
	require.Equal(t, "provider lookup inconclusive", *x.EscalationReason)
	rest, err := reads.ListEscalations(ctx, &projections.TimeCursor{At: *x.EscalatedAt, ID: x.ID}, 10)
	require.NoError(t, err)
	require.Empty(t, rest.Escalations, "nothing after the last")

	evs, err := reads.EvidenceOfExecutions(ctx, []string{x.OperationID}, []string{x.ID}, 5)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, projections.EvidenceWriteRefused, evs[0].Kind)

	all, err := reads.ListEvidence(ctx, projections.EvidenceQuery{})
	require.NoError(t, err)
	require.Greater(t, len(all.Evidence), 4)
	for i := 1; i < len(all.Evidence); i++ {
		require.Less(t, all.Evidence[i-1].Seq, all.Evidence[i].Seq, "log order")
	}
	newest, err := reads.ListEvidence(ctx, projections.EvidenceQuery{NewestFirst: true, Limit: 2})
	require.NoError(t, err)
	require.Len(t, newest.Evidence, 2)
	require.Equal(t, all.Evidence[len(all.Evidence)-1].Seq, newest.Evidence[0].Seq)
	older, err := reads.ListEvidence(ctx, projections.EvidenceQuery{NewestFirst: true, After: newest.Next})
	require.NoError(t, err)
	require.Len(t, older.Evidence, len(all.Evidence)-2)
	require.Less(t, older.Evidence[0].Seq, newest.Evidence[1].Seq)

	replays, err := reads.ListEvidence(ctx, projections.EvidenceQuery{ReplayOnly: true})
	require.NoError(t, err)
	require.Len(t, replays.Evidence, 2, "OP-A's and OP-Y's")
	for _, ev := range replays.Evidence {
		require.Equal(t, "capability.already-consumed", ev.Reason)
	}
	refused, err := reads.ListEvidence(ctx, projections.EvidenceQuery{Kind: projections.EvidenceWriteRefused})
	require.NoError(t, err)
	require.Len(t, refused.Evidence, 1)
	forged, err := reads.ListEvidence(ctx, projections.EvidenceQuery{Reason: "capability.invalid"})
	require.NoError(t, err)
	for _, ev := range forged.Evidence {
		require.Equal(t, "capability.invalid", ev.Reason)
	}
	ofA, err := reads.ListEvidence(ctx, projections.EvidenceQuery{OperationID: "OP-A"})
	require.NoError(t, err)
	for _, ev := range ofA.Evidence {
		require.Equal(t, "OP-A", *ev.OperationID)
	}
}

// TestReadsGauges: the /metrics gauges' counts and the oldest Unknown.
func TestReadsGauges(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	e.world()
	reads, err := projections.NewReads(e.pool, e.schema)
	require.NoError(t, err)
	e.catchUp()
	_, found, err := reads.OldestUnknown(t.Context())
	require.NoError(t, err)
	require.False(t, found, "the world's Unknown executions were all settled or escalated")
	stuck := e.request("OP-STUCK", 2_000)
	stuck.record(stuck.execute("MSG-S1"), "Unknown", "")
	e.catchUp()
	since, found, err := reads.OldestUnknown(t.Context())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, e.clock.Now(), since)
	counts, err := reads.ExecutionsByState(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, counts["Unknown"])
	require.EqualValues(t, 1, counts["Escalated"])
	require.EqualValues(t, 1, counts["Executing"])
	require.EqualValues(t, 5, counts["Completed"], "OP-A, OP-B, OP-G and OP-X's two uses")
	require.EqualValues(t, 2, counts["NotApplied"], "OP-D's first attempt and OP-Y's one use")

	escalatedAt, found, err := reads.OldestEscalated(t.Context())
	require.NoError(t, err)
	require.True(t, found, "the world has one Escalated execution")
	require.False(t, escalatedAt.Before(start))
	n, earliest, err := reads.PastLease(t.Context(), start)
	require.NoError(t, err)
	require.Zero(t, n, "no lease had expired when the world began")
	require.True(t, earliest.IsZero())
	later := e.clock.Now().Add(24 * time.Hour)
	n, earliest, err = reads.PastLease(t.Context(), later)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the one Executing execution, a day past its lease")
	require.True(t, earliest.After(start) && earliest.Before(later), "its lease expiry: %s", earliest)
}
