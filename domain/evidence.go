package domain

import (
	"strings"
	"time"
)

// Evidence streams. What others present to an operation — refused
// presentations, duplicate deliveries, refused executor writes, and the
// summaries that count such refusals past the bound (RefusalsSummarized) —
// changes nothing an operation decides on, so it is kept beside the
// operation's stream rather than in it: in the operation's evidence stream,
// "evidence-<OperationId>". Appending there never moves the operation's
// stream version, so no presentation makes the lease holder's renewal or
// outcome conflict, reload or wait (invariant 14). An operation's history is
// its stream and its evidence stream merged in the order of the global log;
// each stream keeps its own hash chain, and the signed digests cover both.
//
// Evidence that names no existing operation goes to the unattributed
// evidence stream of its day, "evidence-unattributed-<YYYY-MM-DD>" (by the
// ledger's clock, UTC), so that what one day's hostile traffic left is read
// without reading every day before it. EvidenceStream, the single
// unattributed stream of earlier builds, is still read.

// EvidenceStreamPrefix starts the name of every evidence stream.
const EvidenceStreamPrefix = "evidence-"

// EvidenceStreamOf is operation op's evidence stream: "evidence-<OperationId>".
func EvidenceStreamOf(op OperationID) string { return EvidenceStreamPrefix + string(op) }

// OperationIDFromEvidenceStream returns the operation of an operation's
// evidence stream name (never of an unattributed one).
func OperationIDFromEvidenceStream(stream string) (OperationID, bool) {
	s, ok := strings.CutPrefix(stream, EvidenceStreamPrefix)
	if !ok || !strings.HasPrefix(s, PrefixOperation) || len(s) == len(PrefixOperation) {
		return "", false
	}
	return OperationID(s), true
}

// UnattributedStreamFor is the unattributed evidence stream of the day of t
// (UTC): "evidence-unattributed-2026-11-26".
func UnattributedStreamFor(t time.Time) string {
	return EvidenceStream + "-" + t.UTC().Format(time.DateOnly)
}

// IsUnattributedStream reports whether stream holds evidence that names no
// existing operation: EvidenceStream, or one day's unattributed stream.
func IsUnattributedStream(stream string) bool {
	if stream == EvidenceStream {
		return true
	}
	day, ok := strings.CutPrefix(stream, EvidenceStream+"-")
	if !ok {
		return false
	}
	_, err := time.Parse(time.DateOnly, day)
	return err == nil
}

// OperationOfStream returns the operation a stream belongs to — an
// operation's stream or its evidence stream — and whether it is the
// evidence stream.
func OperationOfStream(stream string) (op OperationID, evidence, ok bool) {
	if op, ok := OperationIDFromStream(stream); ok {
		return op, false, true
	}
	if op, ok := OperationIDFromEvidenceStream(stream); ok {
		return op, true, true
	}
	return "", false, false
}

// IsEvidence reports whether e is evidence of what others presented: it
// changes no state a decision depends on, and belongs in an evidence stream
// (operation streams written before evidence streams existed hold the first
// three too).
func IsEvidence(e Event) bool { return e != nil && IsEvidenceType(e.EventType()) }

// IsEvidenceType is IsEvidence by event type: the one list of evidence
// types (the console collapses runs of them into counted groups by it).
func IsEvidenceType(t string) bool {
	switch t {
	case TypePresentationRejected, TypeDeliveryDuplicated, TypeWriteRefused, TypeRefusalsSummarized:
		return true
	}
	return false
}
