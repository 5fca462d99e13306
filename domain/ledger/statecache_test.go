package ledger

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

func cachedOp(id string, version int64, messages int) *domain.Operation {
	o := domain.NewOperation()
	o.ID, o.Version = domain.OperationID(id), version
	for i := range messages {
		o.Messages[domain.MessageID(fmt.Sprintf("MSG-%d", i))] = struct{}{}
	}
	return o
}

func TestStateCacheBoundedByEntries(t *testing.T) {
	c := newStateCache(3, 1<<30)
	for i := range 5 {
		c.put(fmt.Sprintf("s%d", i), cachedOp(fmt.Sprintf("OP-%d", i), 1, 0), "")
	}
	for i, want := range []bool{false, false, true, true, true} {
		_, _, ok := c.get(fmt.Sprintf("s%d", i))
		require.Equal(t, want, ok, "s%d: least recently used first out", i)
	}
	require.Equal(t, 3, c.lru.Len())
}

func TestStateCacheBoundedByBytes(t *testing.T) {
	big := cachedOp("OP-big", 1, 1000)
	size := stateSize(big)
	c := newStateCache(100, 2*size+size/2)
	c.put("a", big, "")
	c.put("b", cachedOp("OP-b", 1, 1000), "")
	c.put("c", cachedOp("OP-c", 1, 1000), "")
	_, _, ok := c.get("a")
	require.False(t, ok, "the oldest goes when the bytes are exceeded")
	require.LessOrEqual(t, c.bytes, c.maxBytes)
	c.put("huge", cachedOp("OP-huge", 1, 100_000), "")
	_, _, ok = c.get("huge")
	require.False(t, ok, "a state larger than the whole bound is not kept")
}

func TestStateCacheSharesStates(t *testing.T) {
	c := newStateCache(10, 1<<30)
	o := cachedOp("OP-1", 4, 1)
	c.put("s", o, "EV-4")
	got, anchor, ok := c.get("s")
	require.True(t, ok)
	require.Same(t, o, got, "get hands out the state put, with no copy")
	require.Equal(t, "EV-4", anchor)

	c.put("s", cachedOp("OP-1", 2, 0), "EV-2") // a slower command finishing late
	again, anchor, _ := c.get("s")
	require.Same(t, o, again, "an older state never replaces a newer one")
	require.Equal(t, "EV-4", anchor)
	c.forget("s")
	_, _, ok = c.get("s")
	require.False(t, ok)
	require.Zero(t, c.bytes)
}

func TestStateCacheOff(t *testing.T) {
	c := newStateCache(-1, 1)
	c.put("s", cachedOp("OP-1", 1, 0), "")
	_, _, ok := c.get("s")
	require.False(t, ok)
}
