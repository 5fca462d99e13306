package postgres_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

func TestPositionRoundTrip(t *testing.T) {
	t.Parallel()
	for _, p := range []postgres.Position{
		{}, {TransactionID: 741, GlobalPosition: 12}, {TransactionID: math.MaxUint64, GlobalPosition: math.MaxInt64},
	} {
		got, err := postgres.ParsePosition(p.String())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	require.Equal(t, "741/12", postgres.Position{TransactionID: 741, GlobalPosition: 12}.String())
	for _, bad := range []string{"", "741", "741/", "/12", "741/12/1", "+741/12", "741/+12", "0741/12", "741/-1", "-1/12", "741 /12", "18446744073709551616/1"} {
		_, err := postgres.ParsePosition(bad)
		require.ErrorIs(t, err, eventstore.ErrInvalidPosition, "%q", bad)
	}
}

func TestPositionCompare(t *testing.T) {
	t.Parallel()
	// Transaction id orders first: an event written by an older transaction
	// comes first even with a higher global position.
	ordered := []postgres.Position{{}, {1, 9}, {2, 3}, {2, 4}, {3, 1}}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			require.Equal(t, want, a.Compare(b), "%s vs %s", a, b)
		}
	}
	require.Zero(t, postgres.Position{}.Compare(nil), "nil is the start")
	require.Positive(t, postgres.Position{TransactionID: 1, GlobalPosition: 1}.Compare(nil))
	require.Panics(t, func() { postgres.Position{}.Compare(otherPosition{}) })
}

type otherPosition struct{}

func (otherPosition) String() string                  { return "other" }
func (otherPosition) Compare(eventstore.Position) int { return 0 }
