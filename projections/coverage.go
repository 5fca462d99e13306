package projections

import (
	"errors"
	"strconv"

	"opledger/domain"
	"opledger/eventstore"
)

// Folds reports whether the read models' fold has an explicit case for e's
// type: one that folds it, or one that ignores it on purpose. It folds e
// into a model of a requested operation and looks only at whether the fold
// reached its default branch (an event the model refuses for its content,
// such as an outcome for an execution never claimed, has a case). The
// codec's coverage test asks it for every registered event type.
func Folds(e domain.Event) bool {
	const op = "OP-COVERAGE"
	m := newBatchModel()
	stream := domain.OperationID(op).StreamName()
	rec := func(typ string, v int64) *eventstore.RecordedEvent {
		return &eventstore.RecordedEvent{StreamID: stream, Version: v, ID: "coverage-" + strconv.FormatInt(v, 10), Type: typ, Position: probePosition(v)}
	}
	if _, ok := e.(domain.OperationRequested); !ok {
		req := decodedEvent{rec: rec(domain.TypeOperationRequested, 0), seq: 1, event: domain.OperationRequested{OperationID: op}, op: op}
		if err := m.fold(req); err != nil {
			return false
		}
	}
	err := m.fold(decodedEvent{rec: rec(e.EventType(), 1), seq: 2, event: e, op: op})
	return !errors.Is(err, errNotFolded)
}

// probePosition is a global position for Folds' events.
type probePosition int64

func (p probePosition) String() string { return strconv.FormatInt(int64(p), 10) }

func (p probePosition) Compare(other eventstore.Position) int {
	o, _ := other.(probePosition)
	switch {
	case p < o:
		return -1
	case p > o:
		return 1
	}
	return 0
}
