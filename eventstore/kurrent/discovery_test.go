package kurrent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
)

// TestOpenThroughGossip: with a discovery connection string the client
// reads the cluster's gossip and connects to the leader it names.
func TestOpenThroughGossip(t *testing.T) {
	t.Parallel()
	srv := kurrenttest.Start(t)
	url := strings.Replace(srv.URL(), "esdb://", "esdb+discover://", 1)
	s := openStore(t, kurrent.Config{URL: url})
	mustAppend(t, s, "operation-OP-1", eventstore.NoStream(), newEvents(1))
	got, err := s.ReadStream(t.Context(), "operation-OP-1", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
}
