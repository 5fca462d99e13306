package kurrent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
)

func TestPositionStringAndParse(t *testing.T) {
	for _, p := range []kurrent.Position{{}, {Commit: 1843, Prepare: 1843}, {Commit: 7, Prepare: 3}, {Commit: 1<<64 - 1, Prepare: 1<<64 - 1}} {
		got, err := kurrent.ParsePosition(p.String())
		require.NoError(t, err, p.String())
		require.Equal(t, p, got)
	}
	require.Equal(t, "C:1843/P:1842", kurrent.Position{Commit: 1843, Prepare: 1842}.String())

	for _, text := range []string{
		"", "1843", "C:1843", "C:1843/P:", "C:/P:1843", "C:-1/P:2", "C:1/P:-2", "C:+1/P:2", "C:01/P:2", "C:1/P:02",
		" C:1/P:2", "C:1/P:2 ", "c:1/p:2", "C:1/P:2/P:3", "C:a/P:b", "C:18446744073709551616/P:1",
		"741/12", // a Postgres checkpoint
	} {
		_, err := kurrent.ParsePosition(text)
		require.ErrorIs(t, err, eventstore.ErrInvalidPosition, "ParsePosition(%q)", text)
	}
}

func TestPositionCompare(t *testing.T) {
	a := kurrent.Position{Commit: 100, Prepare: 100}
	b := kurrent.Position{Commit: 100, Prepare: 180}
	c := kurrent.Position{Commit: 200, Prepare: 50}
	require.Negative(t, a.Compare(b), "same commit: prepare decides")
	require.Negative(t, b.Compare(c), "commit decides first")
	require.Positive(t, c.Compare(a))
	require.Zero(t, a.Compare(kurrent.Position{Commit: 100, Prepare: 100}))
	require.Positive(t, a.Compare(nil), "nil is the start of the log")
	require.Zero(t, kurrent.Position{}.Compare(nil), "the zero position is the start")
	require.Panics(t, func() { a.Compare(foreignPosition{}) }, "another backend's position")
}

type foreignPosition struct{}

func (foreignPosition) String() string                  { return "foreign" }
func (foreignPosition) Compare(eventstore.Position) int { return 0 }
