package kurrenttest

import (
	"slices"

	"github.com/google/uuid"
)

// StoredEvent is an event as the server holds it, for Tamper.
type StoredEvent struct {
	Stream      string
	Number      int64 // its revision in its stream
	ID          uuid.UUID
	Type        string
	ContentType string
	Data        []byte
	Metadata    []byte // the client's custom metadata, as stored
}

// Tamper rewrites the server's log as someone with access to its files
// could, for tamper-evidence tests: rewrite receives a copy of the whole
// log ($all order, system events included) and returns the log to keep,
// with fields changed, events removed, inserted or moved, revisions
// renumbered or not, as the forger likes. The server then serves the new
// log: streams hold their events in its order, positions are reassigned
// from the start (as a rewritten transaction file would have them), and
// subscribers are woken. Nothing checks what rewrite returns.
func (s *Server) Tamper(rewrite func(log []StoredEvent) []StoredEvent) {
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	old := make([]StoredEvent, len(l.records))
	for i, r := range l.records {
		old[i] = StoredEvent{Stream: r.stream, Number: r.number, ID: r.id, Type: r.eventType, ContentType: r.contentType,
			Data: slices.Clone(r.data), Metadata: slices.Clone(r.metadata)}
	}
	created := l.now().UTC()
	if len(l.records) > 0 {
		created = l.records[len(l.records)-1].created
	}
	l.records, l.streams, l.committed, l.nextPos = nil, map[string][]*record{}, map[uuid.UUID]*record{}, firstPosition
	for _, e := range rewrite(old) {
		r := &record{stream: e.Stream, number: e.Number, id: e.ID, eventType: e.Type, contentType: e.ContentType,
			data: e.Data, metadata: e.Metadata, created: created, pos: l.nextPos}
		l.nextPos += recordOverhead + uint64(len(e.Stream)+len(e.Type)+len(e.Data)+len(e.Metadata))
		l.records = append(l.records, r)
		l.streams[e.Stream] = append(l.streams[e.Stream], r)
		l.committed[e.ID] = r
	}
	close(l.changed)
	l.changed = make(chan struct{})
}
