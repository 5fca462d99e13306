package kurrent

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// Position is a point in $all: KurrentDB's commit and prepare positions
// (byte offsets in the transaction log; for events appended through gRPC
// they are equal). Events are ordered by Commit, then Prepare. The zero
// Position is the start of the log, before every event.
type Position struct {
	Commit  uint64
	Prepare uint64
}

// String renders the position as KurrentDB does, "C:commit/P:prepare",
// e.g. "C:1843/P:1843". ParsePosition reads it back. The letters keep a
// checkpoint of another backend (Postgres writes "741/12") from parsing as
// a KurrentDB position when a deployment switches stores.
func (p Position) String() string {
	return "C:" + strconv.FormatUint(p.Commit, 10) + "/P:" + strconv.FormatUint(p.Prepare, 10)
}

// Compare implements eventstore.Position. A nil other is the start of the
// log. Comparing against another backend's position is a programming error
// and panics.
func (p Position) Compare(other eventstore.Position) int {
	var o Position
	switch v := other.(type) {
	case nil:
	case Position:
		o = v
	default:
		panic(fmt.Sprintf("kurrent: compare with %T, not a kurrent.Position", other))
	}
	return cmp.Or(cmp.Compare(p.Commit, o.Commit), cmp.Compare(p.Prepare, o.Prepare))
}

// ParsePosition decodes text produced by Position.String. Anything else,
// including non-canonical spellings such as "C:+1/P:2" or "C:01/P:2" and
// other backends' positions, is refused with an error wrapping
// eventstore.ErrInvalidPosition.
func ParsePosition(text string) (Position, error) {
	commitText, prepareText, ok := strings.Cut(text, "/P:")
	commitText, okC := strings.CutPrefix(commitText, "C:")
	if !ok || !okC {
		return Position{}, fmt.Errorf("%w: %q: want C:commit/P:prepare", eventstore.ErrInvalidPosition, text)
	}
	commit, err := strconv.ParseUint(commitText, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("%w: %q: commit position: %v", eventstore.ErrInvalidPosition, text, err)
	}
	prepare, err := strconv.ParseUint(prepareText, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("%w: %q: prepare position: %v", eventstore.ErrInvalidPosition, text, err)
	}
	p := Position{Commit: commit, Prepare: prepare}
	if p.String() != text {
		return Position{}, fmt.Errorf("%w: %q: not in canonical form", eventstore.ErrInvalidPosition, text)
	}
	return p, nil
}

// fromClientPosition converts the client's position of an event.
func fromClientPosition(p esdb.Position) Position {
	return Position{Commit: p.Commit, Prepare: p.Prepare}
}

// subscribeFrom is where a subscription to $all starts so that it delivers
// the events strictly after p: the start of $all for nil or the zero
// Position, else p itself (a subscription from a position excludes the event
// at it). Another backend's position is refused.
func subscribeFrom(p eventstore.Position) (esdb.AllPosition, error) {
	switch v := p.(type) {
	case nil:
		return esdb.Start{}, nil
	case Position:
		if v == (Position{}) {
			return esdb.Start{}, nil
		}
		return esdb.Position{Commit: v.Commit, Prepare: v.Prepare}, nil
	default:
		return nil, fmt.Errorf("%w: %T is not a kurrent position", eventstore.ErrInvalidPosition, p)
	}
}

var _ eventstore.Position = Position{}
