// Package ledger is the command handler: it loads an operation's stream,
// lets the pure model decide, and appends the result with the expected
// version it decided on. Optimistic stream versioning is what makes a claim
// atomic and a stale executor fenced across any number of handler instances
// and processes: a conflicting append reloads and decides again.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// ErrContention means an append kept conflicting with concurrent writers
// beyond the handler's retry bound. Nothing was written by this call.
var ErrContention = errors.New("ledger: too many concurrent writers on one operation")

// ErrCorruptStream means a stored stream cannot be folded into a state: a
// gap, an event the model cannot accept, or an undecodable event. It is a
// bug or tampering, never something to paper over.
var ErrCorruptStream = errors.New("ledger: corrupt operation stream")

// Config configures a Handler. Zero values take defaults.
type Config struct {
	Store  eventstore.Store // required
	Clock  clock.Clock      // default clock.System
	Logger *slog.Logger     // default slog.Default()
	// NewID mints identifiers with the given prefix ("EXE-", "CAP-", ...)
	// and event ids (prefix ""). Default: UUIDv7-based.
	NewID func(prefix string) string
	// MaxConflictRetries bounds how often one command reloads and decides
	// again after a version conflict (default 16).
	MaxConflictRetries int
	// MaxAppendRetries bounds how often an append whose outcome is unknown
	// (ErrUnavailable) is resent with the same event ids (default 3). A
	// resend is safe: the store deduplicates by event id.
	MaxAppendRetries int
	// AppendRetryBackoff is the first pause before such a resend (default 50ms,
	// doubled each time).
	AppendRetryBackoff time.Duration
	// MaxStreamEvents bounds how long a stream the handler will load
	// (default 100,000): a stream beyond it is refused, not read without end.
	MaxStreamEvents int
	// ReadPage is the page size for loading a stream (default 1000).
	ReadPage int
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NewID == nil {
		c.NewID = NewID
	}
	c.MaxConflictRetries = cmp.Or(c.MaxConflictRetries, 16)
	c.MaxAppendRetries = cmp.Or(c.MaxAppendRetries, 3)
	c.AppendRetryBackoff = cmp.Or(c.AppendRetryBackoff, 50*time.Millisecond)
	c.MaxStreamEvents = cmp.Or(c.MaxStreamEvents, 100_000)
	c.ReadPage = cmp.Or(c.ReadPage, 1000)
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("ledger: config: Store is required")
	}
	if c.MaxConflictRetries < 1 || c.MaxAppendRetries < 0 || c.MaxStreamEvents < 1 || c.ReadPage < 1 {
		return errors.New("ledger: config: retry bounds and page sizes must be positive")
	}
	return nil
}

// NewID mints an identifier: prefix followed by a UUIDv7 in upper case (time
// ordered, so ids sort roughly by creation). With prefix "" it returns a
// plain UUID for use as an event id.
func NewID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	if prefix == "" {
		return id.String()
	}
	return prefix + strings.ToUpper(id.String())
}

// Handler executes commands against operation streams. Safe for concurrent
// use; several Handlers over one store (in one process or many) behave as one.
type Handler struct {
	cfg Config
}

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg}, nil
}

// Clock returns the handler's clock.
func (h *Handler) Clock() clock.Clock { return h.cfg.Clock }

// Store returns the handler's store.
func (h *Handler) Store() eventstore.Store { return h.cfg.Store }

// Cause says who and what caused a command; it becomes the events' metadata.
type Cause struct {
	Actor         string
	CausationID   string
	CorrelationID domain.CorrelationID // default: the operation's
}

// Decision is what a command decides on a loaded state: events to append
// (possibly evidence of a refusal) and the refusal, if any.
type Decision func(state *domain.Operation, now time.Time) ([]domain.Event, error)

// Execute runs one command on operation op: load, decide, append with the
// version decided on; on a version conflict, reload and decide again, up to
// MaxConflictRetries times. It returns the state after the append, the
// events appended, and the decision's error (a *domain.Refusal) or the
// store's. Events returned together with a refusal were recorded.
func (h *Handler) Execute(ctx context.Context, op domain.OperationID, by Cause, decide Decision) (*domain.Operation, []domain.Event, error) {
	stream := op.StreamName()
	for try := 0; try < h.cfg.MaxConflictRetries; try++ {
		state, err := h.Load(ctx, op)
		if err != nil {
			return nil, nil, err
		}
		now := h.cfg.Clock.Now()
		events, derr := decide(state, now)
		if len(events) == 0 {
			return state, nil, derr
		}
		expected := eventstore.Exact(state.Version)
		if _, err := h.appendEvents(ctx, stream, expected, state.CorrelationID, by, now, events); err != nil {
			if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
				h.cfg.Logger.DebugContext(ctx, "version conflict; deciding again", "stream", stream, "try", try+1)
				continue
			}
			return nil, nil, err
		}
		for _, e := range events {
			if err := state.Evolve(e); err != nil {
				return nil, nil, fmt.Errorf("%w: %s: decided event does not apply: %v", ErrCorruptStream, stream, err)
			}
			state.Version++
		}
		return state, events, derr
	}
	return nil, nil, fmt.Errorf("%s: %w after %d conflicts", stream, ErrContention, h.cfg.MaxConflictRetries)
}

// appendEvents encodes and appends events, resending the very same append
// (same event ids, same expected version) when its outcome is unknown.
func (h *Handler) appendEvents(ctx context.Context, stream string, expected eventstore.ExpectedVersion, corr domain.CorrelationID, by Cause, now time.Time, events []domain.Event) (eventstore.AppendResult, error) {
	meta := domain.Metadata{CorrelationID: cmp.Or(by.CorrelationID, corr), CausationID: by.CausationID, Actor: by.Actor, RecordedAt: now}
	data := make([]eventstore.EventData, len(events))
	for i, e := range events {
		d, err := codec.EncodeEvent(h.cfg.NewID(""), e, meta)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		data[i] = d
	}
	backoff := h.cfg.AppendRetryBackoff
	for resend := 0; ; resend++ {
		res, err := h.cfg.Store.Append(ctx, stream, expected, data)
		if err == nil || !errors.Is(err, eventstore.ErrUnavailable) || resend >= h.cfg.MaxAppendRetries || ctx.Err() != nil {
			return res, err
		}
		h.cfg.Logger.WarnContext(ctx, "append outcome unknown; resending the same events", "stream", stream, "resend", resend+1, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
		backoff *= 2
	}
}

// Load folds operation op's stream into its state. A stream that does not
// exist loads as a state whose Exists() is false.
func (h *Handler) Load(ctx context.Context, op domain.OperationID) (*domain.Operation, error) {
	stream := op.StreamName()
	state := domain.NewOperation()
	for from := int64(0); ; {
		page, err := h.cfg.Store.ReadStream(ctx, stream, from, h.cfg.ReadPage)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", stream, err)
		}
		for _, rec := range page {
			if rec.Version != state.Version+1 {
				return nil, fmt.Errorf("%w: %s: version %d follows %d", ErrCorruptStream, stream, rec.Version, state.Version)
			}
			d, err := codec.DecodeRecorded(rec)
			if err != nil {
				// Wrapped as well: a newer build's event (codec.ErrNewerVersion,
				// codec.ErrUnknownEventType) is not this build's to decide on.
				return nil, fmt.Errorf("%w: %s@%d: %w", ErrCorruptStream, stream, rec.Version, err)
			}
			if err := state.Evolve(d.Event); err != nil {
				return nil, fmt.Errorf("%w: %s@%d: %v", ErrCorruptStream, stream, rec.Version, err)
			}
			state.Version = rec.Version
		}
		if len(page) < h.cfg.ReadPage {
			return state, nil
		}
		from = state.Version + 1
		if from >= int64(h.cfg.MaxStreamEvents) {
			return nil, fmt.Errorf("load %s: stream longer than %d events: refusing to load it", stream, h.cfg.MaxStreamEvents)
		}
	}
}

// DecodeRecorded decodes a stored event into its domain type.
//
// Deprecated: the codec reads events (codec.DecodeRecorded, which returns
// the metadata too); this forwards to it.
func DecodeRecorded(rec eventstore.RecordedEvent) (domain.Event, error) {
	d, err := codec.DecodeRecorded(rec)
	return d.Event, err
}
