package httpapi

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/clock"
)

// TestLimiterTracksABoundedNumberOfTokens: past MaxTracked, full (idle)
// buckets go first, then the least recently used; a dropped bucket comes
// back full, which only ever lets a token through, never refuses it.
func TestLimiterTracksABoundedNumberOfTokens(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	cfg := RateLimit{PerSecond: 1, Burst: 2, MaxTracked: 3, Clock: clk}
	cfg.setDefaults()
	l := newLimiter(cfg)
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i)}) }

	for i := range 3 {
		ok, _ := l.allow(key(i))
		require.True(t, ok)
		clk.Advance(100 * time.Millisecond)
	}
	require.Equal(t, 3, l.tracked())
	ok, _ := l.allow(key(3)) // every bucket in use: key 0, the oldest, goes
	require.True(t, ok)
	require.Equal(t, 3, l.tracked())
	_, kept := l.buckets[key(0)]
	require.False(t, kept)

	clk.Advance(2 * time.Second) // all full again: all dropped for the next
	ok, _ = l.allow(key(4))
	require.True(t, ok)
	require.Equal(t, 1, l.tracked())

	// A bucket in use keeps its count: the second request drains it.
	ok, _ = l.allow(key(4))
	require.True(t, ok)
	ok, wait := l.allow(key(4))
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
}
