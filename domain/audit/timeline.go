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

// Replay reads operation op's history straight from the store (never from
// a projection) and returns one row per event: its stream's and its
// evidence stream's (domain.EvidenceStreamOf; those rows name their
// Stream), merged in the order of the global log. It fails on an operation
// with no events (ErrNoSuchOperation), on a version gap, on an event it
// cannot decode, and on a history longer than MaxReplayEvents: an audit
// trail that cannot be read completely is reported, not rendered in part.
func Replay(ctx context.Context, store eventstore.Store, op domain.OperationID) ([]TimelineRow, error) {
	rows, pos, err := replayStream(ctx, store, op.StreamName(), MaxReplayEvents)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("replay %s: %w", op.StreamName(), ErrNoSuchOperation)
	}
	evidence := domain.EvidenceStreamOf(op)
	erows, epos, err := replayStream(ctx, store, evidence, MaxReplayEvents-len(rows))
	if err != nil {
		return nil, err
	}
	if len(erows) == 0 {
		return rows, nil
	}
	for i := range erows {
		erows[i].Stream = evidence
	}
	merged := make([]TimelineRow, 0, len(rows)+len(erows))
	i, j := 0, 0
	for i < len(rows) || j < len(erows) {
		if j == len(erows) || (i < len(rows) && pos[i].Compare(epos[j]) < 0) {
			merged = append(merged, rows[i])
			i++
		} else {
			merged = append(merged, erows[j])
			j++
		}
	}
	return merged, nil
}

// replayStream reads stream's rows and their positions, refusing one of
// more than max events.
func replayStream(ctx context.Context, store eventstore.Store, stream string, max int) ([]TimelineRow, []eventstore.Position, error) {
	var rows []TimelineRow
	var pos []eventstore.Position
	for next := int64(0); ; {
		page, err := store.ReadStream(ctx, stream, next, min(replayPage, max-int(next)+1))
		if err != nil {
			return nil, nil, fmt.Errorf("replay %s: %w", stream, err)
		}
		for _, rec := range page {
			if rec.Version != next {
				return nil, nil, fmt.Errorf("replay %s: version %d where %d was due: the stream has a gap", stream, rec.Version, next)
			}
			if int(next) >= max {
				return nil, nil, fmt.Errorf("replay %s: history longer than %d events: refusing to render it", stream, MaxReplayEvents)
			}
			row, err := timelineRow(rec)
			if err != nil {
				return nil, nil, fmt.Errorf("replay %s@%d (%s): %w", stream, rec.Version, rec.Position, err)
			}
			rows = append(rows, row)
			pos = append(pos, rec.Position)
			next++
		}
		if len(page) < replayPage {
			return rows, pos, nil
		}
	}
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

// RowOf decodes one stored event of an operation's stream, or of its
// evidence stream (the row's Stream set), into its row, as Replay does: for
// a reader that reads the streams itself (the console, which reads only
// what the streams gained since it last looked).
func RowOf(rec eventstore.RecordedEvent) (TimelineRow, error) {
	row, err := timelineRow(rec)
	if err != nil {
		return TimelineRow{}, fmt.Errorf("%s@%d (%s): %w", rec.StreamID, rec.Version, rec.Position, err)
	}
	if _, evidence, ok := domain.OperationOfStream(rec.StreamID); ok && evidence {
		row.Stream = rec.StreamID
	}
	return row, nil
}
