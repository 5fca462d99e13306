package pgqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Consume claims ahead about what its handlers finish during four claims'
// round trips: next to nothing behind a slow provider (the rest of a burst
// is left for other workers), up to Concurrency again behind a fast one,
// and that much until it has measured both.
func TestClaimAheadFollowsHandlingAndClaimTimes(t *testing.T) {
	l := &claimLoop{q: &Queue{cfg: Config{Concurrency: 32}}}
	require.Equal(t, 32, l.ahead(), "nothing measured yet")
	l.claiming, l.handling = 5*time.Millisecond, 300*time.Millisecond
	require.Equal(t, 3, l.ahead(), "a slow provider: ceil(4*32*5/300)")
	l.claiming, l.handling = 4*time.Millisecond, 15*time.Millisecond
	require.Equal(t, 32, l.ahead(), "a fast one: capped at Concurrency")
	l.claiming, l.handling = time.Millisecond, 40*time.Millisecond
	require.Equal(t, 4, l.ahead())

	require.Equal(t, 10*time.Millisecond, average(0, 10*time.Millisecond), "the first value")
	require.Equal(t, 11*time.Millisecond, average(10*time.Millisecond, 26*time.Millisecond), "a sixteenth of the way")
}
