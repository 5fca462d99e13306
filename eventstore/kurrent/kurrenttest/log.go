package kurrenttest

import (
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// KurrentDB's expected-version sentinels (EventStore.Core.Data.ExpectedVersion).
const (
	expectedNoStream     int64 = -1
	expectedAny          int64 = -2
	expectedStreamExists int64 = -4
)

// firstPosition is where the first record goes: a real log starts with an
// epoch record, so no event sits at position 0 (the start of $all).
const firstPosition uint64 = 256

// recordOverhead approximates a prepare record's fixed size, so positions
// advance like byte offsets in a transaction file.
const recordOverhead = 88

// record is one event in the log. Records are immutable once written.
type record struct {
	stream      string
	number      int64 // 0-based revision in its stream
	id          uuid.UUID
	eventType   string
	contentType string
	data        []byte
	metadata    []byte // the client's "custom metadata"
	created     time.Time
	pos         uint64 // commit and prepare position: one implicit transaction per event
}

// proposed is an event of an append request.
type proposed struct {
	id          uuid.UUID
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
}

// outcomeKind is how the commit check decided an append.
type outcomeKind int

const (
	written outcomeKind = iota
	idempotent
	wrongVersion
)

// outcome is the result of an append.
type outcome struct {
	kind    outcomeKind
	last    int64  // written/idempotent: revision of the last event
	pos     uint64 // written/idempotent: position of that event
	current int64  // wrongVersion: the stream's revision (-1: no stream)
}

// eventLog is the server's data: one global log and an index per stream. It
// is safe for concurrent use; writes serialize on mu, like KurrentDB's
// single writer.
type eventLog struct {
	mu      sync.Mutex
	records []*record
	streams map[string][]*record
	// committed is KurrentDB's committed-events cache (event id -> record),
	// consulted for expected revision Any and stream_exists. Unbounded here.
	committed map[uuid.UUID]*record
	nextPos   uint64
	// changed is closed and replaced on every write, waking subscribers.
	changed chan struct{}
	now     func() time.Time
}

func newEventLog(now func() time.Time) *eventLog {
	return &eventLog{
		streams:   map[string][]*record{},
		committed: map[uuid.UUID]*record{},
		nextPos:   firstPosition,
		changed:   make(chan struct{}),
		now:       now,
	}
}

// append runs KurrentDB's commit check (IndexWriter.CheckCommit) and writes
// the events if it passes:
//
//   - stream_exists on a stream without events is a wrong expected version;
//   - any and stream_exists: if the first event id is not in the committed
//     cache for this stream, the events are written at the end; if every id
//     is, the append is idempotent and reports where they sit; if only some
//     are, it is a wrong expected version ("corrupted idempotency");
//   - an exact revision (or no_stream, -1) behind the stream's revision: if
//     the events sit at expected+1, expected+2, ... in this stream, the append
//     is idempotent; otherwise it is a wrong expected version;
//   - an exact revision ahead of the stream: wrong expected version;
//   - an exact revision equal to the stream's: the events are written, with
//     no look at their ids (a duplicate id elsewhere is not refused).
//
// A wrong expected version reports the stream's revision.
func (l *eventLog) append(stream string, expected int64, events []proposed) outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.streams[stream]
	current := int64(len(recs)) - 1
	refused := outcome{kind: wrongVersion, current: current}

	if expected == expectedStreamExists && current < 0 {
		return refused
	}
	if expected == expectedAny || expected == expectedStreamExists {
		var first, last *record
		for i, e := range events {
			r, ok := l.committed[e.id]
			if !ok || r.stream != stream {
				if i == 0 {
					return l.write(stream, current, events)
				}
				return refused // part of the batch is stored, part is not
			}
			if first == nil {
				first = r
			}
			last = r
		}
		if last == nil { // no events: nothing to write
			return outcome{kind: written, last: current}
		}
		return outcome{kind: idempotent, last: last.number, pos: last.pos}
	}
	if expected < current {
		n := expected
		for _, e := range events {
			n++
			if n <= current && recs[n].id == e.id {
				continue
			}
			return refused // the first event differs, or a later one does
		}
		if n == expected {
			return refused // no events
		}
		return outcome{kind: idempotent, last: n, pos: recs[n].pos}
	}
	if expected > current {
		return refused
	}
	return l.write(stream, current, events)
}

// write appends events to stream after revision current. Callers hold mu.
func (l *eventLog) write(stream string, current int64, events []proposed) outcome {
	if len(events) == 0 {
		return outcome{kind: written, last: current}
	}
	created := l.now().UTC()
	var last *record
	for i, e := range events {
		r := &record{
			stream: stream, number: current + 1 + int64(i), id: e.id, eventType: e.eventType,
			contentType: e.contentType, data: slices.Clone(e.data), metadata: slices.Clone(e.metadata),
			created: created, pos: l.nextPos,
		}
		l.nextPos += recordOverhead + uint64(len(stream)+len(e.eventType)+len(e.data)+len(e.metadata))
		l.records = append(l.records, r)
		l.streams[stream] = append(l.streams[stream], r)
		l.committed[e.id] = r // KurrentDB overwrites, too (throwOnDuplicate: false)
		last = r
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return outcome{kind: written, last: last.number, pos: last.pos}
}

// stream returns stream's records (nil if it has none).
func (l *eventLog) stream(name string) []*record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streams[name]
}

// snapshot returns the log's records after index from (at most max of
// them), whether they reach the end of the log, and the channel the next
// write will close.
func (l *eventLog) snapshot(from, max int) (recs []*record, atEnd bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from = min(from, len(l.records))
	end := min(len(l.records), from+max)
	return l.records[from:end], end == len(l.records), l.changed
}

// all returns the whole log as it is now.
func (l *eventLog) all() []*record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.records
}

// firstAtOrAfter returns the index of the first record at or after pos.
func firstAtOrAfter(recs []*record, pos uint64) int {
	i, _ := slices.BinarySearchFunc(recs, pos, func(r *record, p uint64) int {
		switch {
		case r.pos < p:
			return -1
		case r.pos > p:
			return 1
		}
		return 0
	})
	return i
}
