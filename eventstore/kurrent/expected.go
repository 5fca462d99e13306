package kurrent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// toExpectedRevision maps the port's expected version to the client's.
// Both count from 0 (a stream's first event is version/revision 0, a stream
// of n events is at n-1), so the number passes through unchanged:
//
//	Any()                 → esdb.Any{}
//	NoStream(), Exact(-1) → esdb.NoStream{}      (the stream holds no events)
//	Exact(v), v >= 0      → esdb.StreamRevision{Value: v} (its last event is revision v)
//	Exact(v), v < -1      → ErrInvalidAppend     (no stream is ever at such a version)
//
// Off by one either way would let an append pass on a stream that moved
// (Exact(n) accepted at revision n-1) or refuse every append; the
// conformance suite and this package's tests probe both ends.
func toExpectedRevision(expected eventstore.ExpectedVersion) (esdb.ExpectedRevision, error) {
	if expected.IsAny() {
		return esdb.Any{}, nil
	}
	if expected.IsNoStream() {
		return esdb.NoStream{}, nil
	}
	v, _ := expected.Version()
	if v < 0 {
		return nil, fmt.Errorf("%w: expected version %d: versions start at 0 (-1: no stream)", eventstore.ErrInvalidAppend, v)
	}
	return esdb.StreamRevision{Value: uint64(v)}, nil
}

// nextVersion is the version an append of n events at expected must report
// (written now or already, for a retry), and false for Any.
func nextVersion(expected eventstore.ExpectedVersion, n int) (int64, bool) {
	if expected.IsNoStream() {
		return int64(n) - 1, true
	}
	if v, exact := expected.Version(); exact {
		return v + int64(n), true
	}
	return 0, false
}

// wrongVersionCurrent precedes the stream's revision in the message with
// which EventStore-Client-Go v4.2.0 (client.go, AppendToStream) reports the
// server's wrong-expected-version answer: "wrong expected version: expecting
// '<expected>' but got '<current>'", current being "no_stream" or a
// revision. The client keeps the number nowhere else.
const wrongVersionCurrent = "' but got '"

// actualVersion extracts the stream's version from the client's
// wrong-expected-version message, false if the message has another form.
func actualVersion(message string) (int64, bool) {
	i := strings.LastIndex(message, wrongVersionCurrent)
	if i < 0 || !strings.HasSuffix(message, "'") {
		return 0, false
	}
	current := message[i+len(wrongVersionCurrent) : len(message)-1]
	if current == "no_stream" {
		return eventstore.NoStreamVersion, true
	}
	v, err := strconv.ParseInt(current, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
