package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/ledger"
)

type eventsResponse struct {
	OperationID domain.OperationID `json:"operation_id"`
	// Stream is the stream read: the operation's, or its evidence stream.
	Stream string      `json:"stream"`
	Events []eventView `json:"events"`
	// NextFrom is the version to ask for next (from=), when there may be more.
	NextFrom *int64 `json:"next_from,omitempty"`
}

type eventView struct {
	Version    int64           `json:"version"`
	EventID    string          `json:"event_id"`
	Type       string          `json:"type"`
	RecordedAt time.Time       `json:"recorded_at"`
	Metadata   domain.Metadata `json:"metadata"`
	Data       json.RawMessage `json:"data"`
}

// getEvents: GET /v1/operations/{id}/events?from=&limit=&stream=, the
// operation's stream itself (not the read models), or with
// stream=evidence its evidence stream (what others presented to it:
// domain.EvidenceStreamOf), each event decoded and checked against this
// build's schema. Pages of at most MaxPageSize events.
func (s *Server) getEvents(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	op, err := pathOperation(r)
	if err != nil {
		return reply{}, err
	}
	limit, err := pageLimit(r)
	if err != nil {
		return reply{}, err
	}
	var from int64
	if text := r.URL.Query().Get("from"); text != "" {
		if from, err = strconv.ParseInt(text, 10, 64); err != nil || from < 0 {
			return reply{}, invalid("from", "from must be a stream version (an integer from 0)")
		}
	}
	stream := op.StreamName()
	switch which := r.URL.Query().Get("stream"); which {
	case "", "operation":
	case "evidence":
		stream = domain.EvidenceStreamOf(op)
	default:
		return reply{}, invalid("stream", "stream must be operation or evidence, not %q", clipText(which))
	}
	recs, err := s.cfg.Ledger.Store().ReadStream(r.Context(), stream, from, limit+1)
	if err != nil {
		return reply{}, fmt.Errorf("read %s: %w", stream, err)
	}
	if len(recs) == 0 && from == 0 && stream == op.StreamName() {
		return reply{}, notFound(string(domain.ReasonOperationUnknown), "no operation %s", op)
	}
	resp := eventsResponse{OperationID: op, Stream: stream, Events: make([]eventView, 0, min(len(recs), limit))}
	if len(recs) > limit {
		next := recs[limit].Version
		resp.NextFrom, recs = &next, recs[:limit]
	}
	for _, rec := range recs {
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			return reply{}, fmt.Errorf("%w: %s@%d: %v", ledger.ErrCorruptStream, rec.StreamID, rec.Version, err)
		}
		data, err := json.Marshal(d.Event) // the event as this build reads it: upcast to its current shape
		if err != nil {
			return reply{}, err
		}
		meta := d.Meta
		meta.RecordedAt = meta.RecordedAt.UTC()
		resp.Events = append(resp.Events, eventView{
			Version: rec.Version, EventID: rec.ID, Type: rec.Type, RecordedAt: rec.RecordedAt.UTC(), Metadata: meta, Data: data,
		})
	}
	return ok(resp), nil
}

// pageLimit reads ?limit= (default DefaultPageSize, at most MaxPageSize).
func pageLimit(r *http.Request) (int, error) {
	text := r.URL.Query().Get("limit")
	if text == "" {
		return DefaultPageSize, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, invalid("limit", "limit must be 1..%d", MaxPageSize)
	}
	return n, nil
}
