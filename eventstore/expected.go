package eventstore

import (
	"fmt"
	"strconv"
)

// ExpectedVersion is the condition an Append places on the stream's current
// version. Build one with Any, NoStream or Exact.
type ExpectedVersion struct {
	kind    expectedKind
	version int64
}

type expectedKind uint8

const (
	expectAny expectedKind = iota
	expectNoStream
	expectExact
)

// Any appends whatever the stream's current version is.
func Any() ExpectedVersion { return ExpectedVersion{kind: expectAny} }

// NoStream appends only if the stream holds no events.
func NoStream() ExpectedVersion {
	return ExpectedVersion{kind: expectNoStream, version: NoStreamVersion}
}

// Exact appends only if the stream's last event has version v (0-based).
// Exact(NoStreamVersion) is the same as NoStream().
func Exact(v int64) ExpectedVersion {
	if v == NoStreamVersion {
		return NoStream()
	}
	return ExpectedVersion{kind: expectExact, version: v}
}

// IsAny reports whether the append is unconditional.
func (e ExpectedVersion) IsAny() bool { return e.kind == expectAny }

// IsNoStream reports whether the append requires an empty stream.
func (e ExpectedVersion) IsNoStream() bool { return e.kind == expectNoStream }

// Version returns the exact version required and true, or false for Any and
// NoStream.
func (e ExpectedVersion) Version() (int64, bool) {
	return e.version, e.kind == expectExact
}

// Matches reports whether a stream at current satisfies the condition.
func (e ExpectedVersion) Matches(current int64) bool {
	switch e.kind {
	case expectNoStream:
		return current == NoStreamVersion
	case expectExact:
		return current == e.version
	default:
		return true
	}
}

func (e ExpectedVersion) String() string {
	switch e.kind {
	case expectNoStream:
		return "no-stream"
	case expectExact:
		return strconv.FormatInt(e.version, 10)
	default:
		return "any"
	}
}

var _ fmt.Stringer = ExpectedVersion{}
