package postgres

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"opledger/eventstore"
)

// Position is a point in the Postgres global log: the id of the transaction
// that wrote an event and the event's global_position. Events are ordered by
// TransactionID first, then GlobalPosition; a checkpoint must keep both, since
// global_position alone is assigned before commit and so is not commit order.
//
// The zero Position is the start of the log. TransactionIDs are xid8 values
// of the cluster that wrote the event. A logical restore (pg_dump/pg_restore)
// into another cluster keeps them while that cluster's counter starts lower;
// CheckSchema then refuses to serve (ErrLogAheadOfServer says how to advance
// the counter so that existing checkpoints stay valid).
type Position struct {
	TransactionID  uint64 // xid8 of the writing transaction
	GlobalPosition int64  // the events.global_position identity value
}

// String renders the position as "transaction/global", e.g. "741/12".
// ParsePosition reads it back.
func (p Position) String() string {
	return strconv.FormatUint(p.TransactionID, 10) + "/" + strconv.FormatInt(p.GlobalPosition, 10)
}

// Compare implements eventstore.Position. A nil other is the start of the log.
// Comparing against another backend's position is a programming error and
// panics.
func (p Position) Compare(other eventstore.Position) int {
	var o Position
	switch v := other.(type) {
	case nil:
	case Position:
		o = v
	default:
		panic(fmt.Sprintf("postgres: compare with %T, not a postgres.Position", other))
	}
	return cmp.Or(cmp.Compare(p.TransactionID, o.TransactionID), cmp.Compare(p.GlobalPosition, o.GlobalPosition))
}

// ParsePosition decodes text produced by Position.String. Anything else,
// including non-canonical spellings such as "+1/2" or "01/2", is refused with
// an error wrapping eventstore.ErrInvalidPosition.
func ParsePosition(text string) (Position, error) {
	txText, posText, ok := strings.Cut(text, "/")
	if !ok {
		return Position{}, fmt.Errorf("%w: %q: want transaction/global", eventstore.ErrInvalidPosition, text)
	}
	tx, err := strconv.ParseUint(txText, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("%w: %q: transaction id: %v", eventstore.ErrInvalidPosition, text, err)
	}
	pos, err := strconv.ParseInt(posText, 10, 64)
	if err != nil || pos < 0 {
		return Position{}, fmt.Errorf("%w: %q: global position must be a non-negative integer", eventstore.ErrInvalidPosition, text)
	}
	p := Position{TransactionID: tx, GlobalPosition: pos}
	if p.String() != text {
		return Position{}, fmt.Errorf("%w: %q: not in canonical form", eventstore.ErrInvalidPosition, text)
	}
	return p, nil
}

// asPosition converts a caller's checkpoint for a query; nil is the start.
func asPosition(p eventstore.Position) (Position, error) {
	switch v := p.(type) {
	case nil:
		return Position{}, nil
	case Position:
		return v, nil
	default:
		return Position{}, fmt.Errorf("%w: %T is not a postgres position", eventstore.ErrInvalidPosition, p)
	}
}

var _ eventstore.Position = Position{}
