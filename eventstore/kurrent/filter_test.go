package kurrent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
)

// TestGlobalLogHoldsOnlyTheStoresStreams: with the default configuration
// (opledger's categories, no namespace), ReadAll and Subscribe never return
// system streams, system event types in our own streams, or other
// categories, whether they were there before or are written while
// following; and Append refuses streams outside the categories.
func TestGlobalLogHoldsOnlyTheStoresStreams(t *testing.T) {
	t.Parallel()
	srv := kurrenttest.Start(t) // it also holds the system events a fresh node writes
	s := openStore(t, kurrent.Config{URL: srv.DirectURL()})
	require.Equal(t, []string{domain.OperationStreamPrefix, "evidence-"}, kurrent.DefaultStreamPrefixes())
	require.True(t, strings.HasPrefix(domain.EvidenceStream, "evidence-"), "the evidence stream is in the default categories")
	foreign := func() {
		srv.AppendRaw("$$operation-OP-1", "$metadata", []byte(`{"$maxAge":60}`))   // stream metadata
		srv.AppendRaw("orders-1", "OrderPlaced", []byte(`{}`))                     // another category
		srv.AppendRaw("$ce-operation", "$>", []byte(`0@operation-OP-1`))           // a projection's link
		srv.AppendRaw("operationally-1", "Whatever", []byte(`{}`))                 // not "operation-"
		srv.AppendRaw("operation-OP-2", "$>", []byte(`0@operation-OP-1`))          // a link in our category
		srv.AppendRaw("evidence-unattributed-old", "$streamDeleted", []byte(`{}`)) // a tombstone-like system type
	}

	foreign()
	op, evidence := newEvents(2), newEvents(1)
	mustAppend(t, s, "operation-OP-1", eventstore.NoStream(), op)
	mustAppend(t, s, "evidence-unattributed", eventstore.NoStream(), evidence)
	foreign()
	want := append(ids(op), ids(evidence)...)

	all, err := s.ReadAll(t.Context(), nil, 100)
	require.NoError(t, err)
	require.Equal(t, want, recordedIDs(all))
	page, err := s.ReadAll(t.Context(), all[0].Position, 1)
	require.NoError(t, err)
	require.Equal(t, want[1:2], recordedIDs(page), "strictly after, one")
	page, err = s.ReadAll(t.Context(), all[len(all)-1].Position, 100)
	require.NoError(t, err)
	require.Empty(t, page, "foreign events after the last of ours are not returned")

	sub := subscribe(t, s, nil, kurrent.SubscribeOptions{BatchSize: 2})
	require.Equal(t, want, recordedIDs(sub.receive(t, len(want))))
	foreign()
	live := newEvents(1)
	mustAppend(t, s, "operation-OP-1", eventstore.Exact(1), live)
	require.Equal(t, ids(live), recordedIDs(sub.receive(t, 1)), "the next event delivered is ours")

	for _, stream := range []string{"orders-2", "$settings", "operationally-2"} {
		_, err := s.Append(t.Context(), stream, eventstore.Any(), newEvents(1))
		require.ErrorIs(t, err, eventstore.ErrInvalidAppend, stream)
	}
	_, err = s.ReadStream(t.Context(), "$settings", 0, 10)
	require.Error(t, err, "system streams are not read through the store")
	require.NotErrorIs(t, err, eventstore.ErrUnavailable)
	other, err := s.ReadStream(t.Context(), "orders-1", 0, 10)
	require.NoError(t, err, "another category can be read by name")
	require.Len(t, other, 3)
}
