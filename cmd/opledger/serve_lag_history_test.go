package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/domain/clock"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// TestLagHistoryRecordsEachMinute: serve's lag history writes the
// projection's lag once per minute of the ledger's clock (a second serve
// in the same minute adds nothing), and a lag it cannot measure is left
// out, the others still written.
func TestLagHistoryRecordsEachMinute(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = projections.Migrate(t.Context(), pool, schema)
	require.NoError(t, err)
	reads, err := projections.NewReads(pool, schema)
	require.NoError(t, err)
	clk := clock.NewManual(time.Date(2026, 11, 27, 16, 0, 30, 0, time.UTC))
	behind := 7 * time.Second
	var failing error
	h := &lagHistory{reads: reads, clock: clk, log: slog.New(slog.DiscardHandler),
		projector: func(context.Context) (projections.Lag, error) {
			return projections.Lag{Events: 4, Behind: behind}, failing
		}}
	h.once(t.Context())
	behind = time.Minute
	h.once(t.Context()) // another serve, the same minute
	clk.Advance(time.Minute)
	failing = errors.New("the store is unreachable")
	h.once(t.Context())
	clk.Advance(time.Minute)
	failing = nil
	h.once(t.Context())

	got, err := reads.LagHistory(t.Context(), clk.Now().Add(-time.Hour), clk.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []projections.LagSample{
		{Source: projections.LagSourceProjector, At: time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC), Events: 4, Behind: 7 * time.Second},
		{Source: projections.LagSourceProjector, At: time.Date(2026, 11, 27, 16, 2, 0, 0, time.UTC), Events: 4, Behind: time.Minute},
	}, got)
}
