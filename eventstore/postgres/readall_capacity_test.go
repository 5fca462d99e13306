package postgres_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// TestReadAllSizesItsPageOnce: a short read makes room for little, and a
// read that goes past the first room grows once to its limit, not through
// every doubling on the way.
func TestReadAllSizesItsPageOnce(t *testing.T) {
	t.Parallel()
	s := pgtest.OpenStore(t)
	ctx := t.Context()
	events := make([]eventstore.EventData, 100)
	for i := range events {
		events[i] = eventstore.EventData{ID: fmt.Sprintf("0190d6a2-7c1e-7000-8000-%012d", i), Type: "T", Data: []byte(`{}`), Metadata: []byte(`{}`)}
	}
	_, err := s.Append(ctx, "s-1", eventstore.NoStream(), events)
	require.NoError(t, err)

	short, err := s.ReadAll(ctx, nil, 10)
	require.NoError(t, err)
	require.Len(t, short, 10)
	require.Equal(t, 10, cap(short), "a read of at most 64 makes room for its limit")

	page, err := s.ReadAll(ctx, nil, 1000)
	require.NoError(t, err)
	require.Len(t, page, 100)
	require.Equal(t, 1000, cap(page), "past the first 64 rows the page grows once, to its limit")

	few, err := s.ReadAll(ctx, page[49].Position, 1000)
	require.NoError(t, err)
	require.Len(t, few, 50)
	require.Equal(t, 64, cap(few), "a read that does not fill its first room stays there")
}
