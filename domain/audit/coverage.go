package audit

import (
	"errors"
	"fmt"
	"strconv"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// The codec's coverage test asks these, for every registered event type,
// whether audit has an explicit case for it (one that checks, renders or
// reads it, or ignores it on purpose), never a default branch.

const coverageOp domain.OperationID = "OP-COVERAGE"

// Checks reports whether Verify's checks have an explicit case for e's
// type: it checks e as the second event of a requested operation and
// looks only at whether the checks reached their default branch.
func Checks(e domain.Event) bool {
	opts := VerifyOptions{}
	opts.setDefaults()
	v := newVerifier(nil, opts)
	st := newOperationState()
	version := int64(0)
	if _, ok := e.(domain.OperationRequested); !ok {
		v.apply(coverageRecord(domain.TypeOperationRequested, 0), decodedEvent{event: domain.OperationRequested{OperationID: coverageOp}}, coverageOp, st)
		version = 1
	}
	v.apply(coverageRecord(e.EventType(), version), decodedEvent{event: e}, coverageOp, st)
	return v.unhandled == 0
}

// Describes reports whether the timeline has a row for e's type.
func Describes(e domain.Event) bool {
	_, ok := describe(e)
	return ok
}

// errNoDiffCase marks an event ProviderDiff decodes but has no case for.
var errNoDiffCase = errors.New("no case in the provider diff")

// DiffReads reports whether ProviderDiff has an explicit case for e's
// type: read for completions, read for the state of an operation the
// export names, or ignored as bearing on neither.
func DiffReads(e domain.Event) bool {
	if diffReading(e.EventType()) == 0 {
		return false
	}
	enc, err := codec.Encode(e, domain.Metadata{})
	if err != nil {
		return false
	}
	rec := coverageRecord(enc.Type, 1)
	rec.Data, rec.Metadata = enc.Data, enc.Metadata
	d := &differ{byID: map[string]*refundRec{}, ops: map[string]*ledgerOp{string(coverageOp): {}}}
	return !errors.Is(d.ledgerEvent(rec), errNoDiffCase)
}

func coverageRecord(typ string, version int64) *eventstore.RecordedEvent {
	return &eventstore.RecordedEvent{StreamID: coverageOp.StreamName(), Version: version, ID: fmt.Sprintf("coverage-%d", version),
		Type: typ, Position: coveragePosition(version)}
}

// coveragePosition is a global position for the probes' events.
type coveragePosition int64

func (p coveragePosition) String() string { return strconv.FormatInt(int64(p), 10) }

func (p coveragePosition) Compare(other eventstore.Position) int {
	o, _ := other.(coveragePosition)
	switch {
	case p < o:
		return -1
	case p > o:
		return 1
	}
	return 0
}
