package pgstate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
	"opledger/eventstore/follow/pgleader"
)

// countingPublisher counts every publication of every message id.
type countingPublisher struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingPublisher) Publish(_ context.Context, msgs []transport.Outbound) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.n[m.MessageID]++
	}
	return nil
}

func (c *countingPublisher) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// Two relays over one log, as two serve instances run them: one leads and
// publishes, the other stands by, so each message is published once. When
// the leader's lock session is killed (pg_terminate_backend), the standby
// takes over from the checkpoint and publishes the rest, again once each.
func TestTwoRelaysPublishEachMessageOnceAndTheStandbyTakesOver(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	pub := &countingPublisher{n: map[string]int{}}
	relay := func(retry time.Duration) (*transport.Relay, *pgleader.Lock) {
		lead, err := pgstate.NewLeader(rig.Pool, rig.Schema, transport.RelayRefundRequests)
		require.NoError(t, err)
		return rig.RelayWith(transport.RelayRefundRequests, pub, transport.SelectRefundRequests, nil, func(c *transport.RelayConfig) {
			c.Leader, c.LeaderRetry, c.LeaderCheck = lead, retry, 20*time.Millisecond
		}), lead
	}
	for i := range 3 {
		rig.Approve(domain.OperationID(fmt.Sprintf("OP-%d", i)))
	}
	// The first, once it lost the lock, waits an hour before trying again:
	// the takeover is the second's, deterministically.
	first, firstLock := relay(time.Hour)
	rig.Go("first relay", first.Run)
	rig.Poll("the first relay leading", func() bool { return first.Status().Leader })
	second, _ := relay(20 * time.Millisecond)
	rig.Go("second relay", second.Run)
	rig.Poll("the first three published", func() bool { return len(pub.counts()) == 3 })
	rig.Poll("the first relay's checkpoint past them", func() bool {
		lag, err := first.Lag(t.Context())
		require.NoError(t, err)
		return lag.Events == 0
	})
	require.False(t, second.Status().Leader, "one leader at a time")
	require.Zero(t, second.Published())

	pid := firstLock.BackendPID()
	require.NotZero(t, pid)
	var terminated bool
	require.NoError(t, rig.Pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&terminated))
	require.True(t, terminated)
	rig.Poll("the second relay leading", func() bool { return second.Status().Leader })
	rig.Poll("the first stepped down", func() bool { return !first.Status().Leader })

	for i := 3; i < 5; i++ {
		rig.Approve(domain.OperationID(fmt.Sprintf("OP-%d", i)))
	}
	rig.Poll("all five published", func() bool { return len(pub.counts()) == 5 })
	for id, n := range pub.counts() {
		require.Equal(t, 1, n, "message %s published once", id)
	}
	require.Equal(t, int64(3), first.Published())
	require.Equal(t, int64(2), second.Published())
	rig.Poll("the checkpoint past everything", func() bool {
		lag, err := second.Lag(t.Context())
		require.NoError(t, err)
		return lag.Events == 0
	})
	for id, n := range pub.counts() {
		require.Equal(t, 1, n, "message %s published once, checkpoint saved", id)
	}
}
