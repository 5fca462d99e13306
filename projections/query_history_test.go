package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/projections"
)

// TestHistoryReads: what the console's pictures read — operations per
// bucket and state, the spans executions spent Unknown and Escalated, and
// the lag samples serve records — agree with the read models.
func TestHistoryReads(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	e := newEnv(t, start)
	ops := e.world()
	stuck := e.request("OP-STUCK", 2_000)
	stuck.record(stuck.execute("MSG-S1"), "Unknown", "")
	e.catchUp()
	reads, err := projections.NewReads(e.pool, e.schema)
	require.NoError(t, err)
	ctx := t.Context()
	end := e.clock.Now().Add(time.Minute)

	counts, err := reads.OperationsByState(ctx, start.Add(-time.Hour), end, time.Minute)
	require.NoError(t, err)
	byState, total := map[string]int64{}, int64(0)
	for _, c := range counts {
		require.False(t, c.Bucket.Before(start.Add(-time.Hour)) || !c.Bucket.Before(end), "bucket %s", c.Bucket)
		require.Zero(t, c.Bucket.Second(), "buckets start on the minute")
		byState[c.State] += c.Count
		total += c.Count
	}
	require.EqualValues(t, len(ops)+1, total, "every operation of the world and the stuck one, once")
	var want int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.schema+`.operations WHERE state = 'Completed'`).Scan(&want))
	require.Equal(t, want, byState["Completed"])
	none, err := reads.OperationsByState(ctx, end, end.Add(time.Hour), time.Minute)
	require.NoError(t, err)
	require.Empty(t, none)

	spans, capped, err := reads.DoubtSpans(ctx, start, end)
	require.NoError(t, err)
	require.False(t, capped)
	execs, err := reads.ExecutionsByState(ctx)
	require.NoError(t, err)
	unknownNow, escalatedNow := 0, 0
	for _, s := range spans {
		require.False(t, s.UnknownSince.IsZero())
		if s.UnknownAt(e.clock.Now()) {
			unknownNow++
		}
		if s.EscalatedAtTime(e.clock.Now()) {
			escalatedNow++
		}
	}
	require.EqualValues(t, execs["Unknown"], unknownNow, "the spans say what the read models say now")
	require.EqualValues(t, execs["Escalated"], escalatedNow)
	require.Greater(t, len(spans), unknownNow+escalatedNow, "the world also has Unknown executions it reconciled")
	before, _, err := reads.DoubtSpans(ctx, start.Add(-2*time.Hour), start.Add(-time.Hour))
	require.NoError(t, err)
	require.Empty(t, before, "nothing was in doubt before the world began")

	// Lag samples: the first of a minute stays; a day and an hour later
	// the old ones are gone.
	at := start.Add(90 * time.Second)
	require.NoError(t, reads.RecordLag(ctx, at, []projections.LagSample{
		{Source: projections.LagSourceProjector, Events: 3, Behind: 1500 * time.Millisecond},
		{Source: "relay:refund-requests", Events: 10_000, Capped: true, Behind: time.Minute}}))
	require.NoError(t, reads.RecordLag(ctx, at.Add(10*time.Second), []projections.LagSample{{Source: projections.LagSourceProjector, Events: 99}}))
	history, err := reads.LagHistory(ctx, start, start.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []projections.LagSample{
		{Source: projections.LagSourceProjector, At: start.Add(time.Minute), Events: 3, Behind: 1500 * time.Millisecond},
		{Source: "relay:refund-requests", At: start.Add(time.Minute), Events: 10_000, Capped: true, Behind: time.Minute},
	}, history)
	require.NoError(t, reads.RecordLag(ctx, at.Add(projections.LagRetention+time.Minute), []projections.LagSample{{Source: projections.LagSourceProjector}}))
	history, err = reads.LagHistory(ctx, start, start.Add(48*time.Hour))
	require.NoError(t, err)
	require.Len(t, history, 1, "samples older than the retention are deleted as new ones are written")
}
