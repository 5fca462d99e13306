package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// MaxReplayEvents bounds the stream Replay reads: the command handler refuses
// to load a longer one, so a longer stream is itself a finding, not something
// to render without end.
const MaxReplayEvents = 100_000

// replayPage is how many events Replay reads per call.
const replayPage = 1000

// ErrNoSuchOperation is returned by Replay for an operation whose stream
// holds no events.
var ErrNoSuchOperation = errors.New("audit: no such operation")

// TimelineRow is one event of an operation's stream, as an auditor reads it.
// Empty fields do not apply to the event.
type TimelineRow struct {
	Position string    `json:"position"` // global log position (backend-specific text)
	Version  int64     `json:"version"`  // 0-based stream version
	Time     time.Time `json:"time"`     // when the fact happened (payload time, else metadata)
	Event    string    `json:"event"`    // event type
	// Stream is set on the events of the operation's evidence stream
	// (domain.EvidenceStreamOf): their Version is that stream's.
	Stream string `json:"stream,omitempty"`
	// Actor is who caused the event: the authenticated principal (a token's
	// name) when a request caused it; Worker the worker label the caller
	// gave (a claim's or a write's worker_id), kept beside it, never for it.
	Actor     string `json:"actor,omitempty"`
	Worker    string `json:"worker_id,omitempty"`
	Causation string `json:"causation_id,omitempty"`

	Execution  domain.ExecutionID  `json:"execution_id,omitempty"`
	Epoch      int64               `json:"epoch,omitempty"`      // the lease epoch the event is under (0: none)
	EpochFrom  int64               `json:"epoch_from,omitempty"` // set on LeaseLapsed: the epoch fenced off
	Message    domain.MessageID    `json:"message_id,omitempty"`
	Capability domain.CapabilityID `json:"capability_id,omitempty"`
	// Outcome is the result the event states: a verdict, an execution state
	// or outcome, a claim status.
	Outcome string `json:"outcome,omitempty"`
	// Reason is a stable reason code (or reconciliation method).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Count is how many refusals a RefusalsSummarized counts (0 on every
	// other row, each of which is one event).
	Count int64 `json:"count,omitempty"`
}

// Replay reads operation op's stream straight from the store (never from a
// projection) and returns one row per event, in version order. It fails on
// an operation with no events (ErrNoSuchOperation), on a version gap, on an
// event it cannot decode, and on a stream longer than MaxReplayEvents: an
// audit trail that cannot be read completely is reported, not rendered in
// part.
func Replay(ctx context.Context, store eventstore.Store, op domain.OperationID) ([]TimelineRow, error) {
	stream := op.StreamName()
	var rows []TimelineRow
	for next := int64(0); next < MaxReplayEvents; {
		page, err := store.ReadStream(ctx, stream, next, min(replayPage, MaxReplayEvents-int(next)))
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", stream, err)
		}
		for _, rec := range page {
			if rec.Version != next {
				return nil, fmt.Errorf("replay %s: version %d where %d was due: the stream has a gap", stream, rec.Version, next)
			}
			row, err := timelineRow(rec)
			if err != nil {
				return nil, fmt.Errorf("replay %s@%d (%s): %w", stream, rec.Version, rec.Position, err)
			}
			rows = append(rows, row)
			next++
		}
		if len(page) < replayPage {
			if len(rows) == 0 {
				return nil, fmt.Errorf("replay %s: %w", stream, ErrNoSuchOperation)
			}
			return rows, nil
		}
	}
	return nil, fmt.Errorf("replay %s: stream longer than %d events: refusing to render it", stream, MaxReplayEvents)
}

// timelineRow decodes one stored event into a row.
func timelineRow(rec eventstore.RecordedEvent) (TimelineRow, error) {
	d, err := codec.DecodeRecorded(rec)
	if err != nil {
		return TimelineRow{}, err
	}
	meta := d.Meta
	row, ok := describe(d.Event)
	if !ok {
		return TimelineRow{}, fmt.Errorf("event type %s has no timeline row", rec.Type)
	}
	row.Position, row.Version, row.Event = rec.Position.String(), rec.Version, rec.Type
	if row.Actor == "" { // who the event names, else who recorded it
		row.Actor = meta.Actor
	}
	row.Causation = meta.CausationID
	switch {
	case !row.Time.IsZero():
	case !meta.RecordedAt.IsZero():
		row.Time = meta.RecordedAt
	default:
		row.Time = rec.RecordedAt
	}
	row.Time = row.Time.UTC()
	return row, nil
}

// RowOf decodes one stored event of an operation's stream into its row, as
// Replay does: for a reader that reads the stream itself (the console,
// which reads only what a stream gained since it last looked).
func RowOf(rec eventstore.RecordedEvent) (TimelineRow, error) {
	row, err := timelineRow(rec)
	if err != nil {
		return TimelineRow{}, fmt.Errorf("%s@%d (%s): %w", rec.StreamID, rec.Version, rec.Position, err)
	}
	return row, nil
}
