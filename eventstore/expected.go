package eventstore

import (
	"fmt"
	"strconv"
)

// ExpectedVersion is the condition an Append places on the stream's current
// version, and optionally on another stream (Beside). Build one with Any,
// NoStream or Exact.
type ExpectedVersion struct {
	kind    expectedKind
	version int64
	fence   Fence
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

// Beside adds fence f to the condition: the append also requires that
// stream f.Stream holds event f.EventID at version f.Version. A zero Fence
// removes it.
func (e ExpectedVersion) Beside(f Fence) ExpectedVersion {
	e.fence = f
	return e
}

// Fence returns the condition's fence on another stream, if any.
func (e ExpectedVersion) Fence() (Fence, bool) { return e.fence, e.fence.Stream != "" }

func (e ExpectedVersion) String() string {
	var s string
	switch e.kind {
	case expectNoStream:
		s = "no-stream"
	case expectExact:
		s = strconv.FormatInt(e.version, 10)
	default:
		s = "any"
	}
	if f, ok := e.Fence(); ok {
		s += " beside " + f.String()
	}
	return s
}

var _ fmt.Stringer = ExpectedVersion{}
