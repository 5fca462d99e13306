package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// Bounds of a read.
const (
	// MaxPage bounds the log events one Read takes, and so the entries of a
	// page.
	MaxPage = 1000
	// DefaultHeadCache is how many operations' heads a Reader keeps.
	DefaultHeadCache = 4096
)

// ErrNoHead wraps the failure to find an operation's OperationRequested
// for an event of its stream: a corrupt stream.
var ErrNoHead = errors.New("feed: operation has no OperationRequested")

// ReaderConfig configures a Reader. Zero values take defaults.
type ReaderConfig struct {
	// Store is the event store whose log the feed reads. Required.
	Store eventstore.Store
	// HeadCache bounds the operations' heads kept in memory (default
	// DefaultHeadCache).
	HeadCache int
	// Regressions is told when a cached head turns out older than the log
	// (an event of its stream sits before it: the log went back and the
	// stream was written again); the head is read again either way
	// (default: nobody is told).
	Regressions eventstore.RegressionObserver
	// PollMin and PollMax bound the pause between empty reads while Wait
	// waits (defaults 20ms, 250ms): a waiting reader reads the log at most
	// 1/PollMin times a second, and sees a new entry within about PollMax.
	PollMin, PollMax time.Duration
}

// Reader reads the feed from the global log. Safe for concurrent use.
type Reader struct {
	cfg   ReaderConfig
	heads *headCache
}

// NewReader validates cfg.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.Store == nil {
		return nil, errors.New("feed: reader config: Store is required")
	}
	cfg.HeadCache = cmp.Or(cfg.HeadCache, DefaultHeadCache)
	cfg.PollMin = cmp.Or(cfg.PollMin, 20*time.Millisecond)
	cfg.PollMax = cmp.Or(cfg.PollMax, 250*time.Millisecond)
	if cfg.HeadCache < 1 || cfg.PollMin <= 0 || cfg.PollMax < cfg.PollMin {
		return nil, errors.New("feed: reader config: HeadCache must be positive, 0 < PollMin <= PollMax")
	}
	return &Reader{cfg: cfg, heads: newHeadCache(cfg.HeadCache)}, nil
}

// ParsePosition reads a position the feed handed out (Entry.Position,
// Page.Next).
func (r *Reader) ParsePosition(text string) (eventstore.Position, error) {
	return r.cfg.Store.ParsePosition(text)
}

// Page is one read of the feed.
type Page struct {
	// Entries are the changes among the events read, in the log's order.
	Entries []Entry
	// Next is where to read on: the position of the last event read,
	// whether or not it made an entry; the position read after when there
	// was none (nil: the start of the log).
	Next eventstore.Position
	// Full says the read took as many events as it could: more are
	// waiting, read on at once.
	Full bool
}

// Read returns the entries among the (at most limit, 1..MaxPage) log events
// after position after (nil: from the start).
func (r *Reader) Read(ctx context.Context, after eventstore.Position, limit int) (Page, error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, fmt.Errorf("feed: read of %d events, want 1..%d", limit, MaxPage)
	}
	recs, err := r.cfg.Store.ReadAll(ctx, after, limit)
	if err != nil {
		return Page{}, fmt.Errorf("feed: read log: %w", err)
	}
	page := Page{Next: after, Full: len(recs) == limit}
	if len(recs) == 0 {
		return page, nil
	}
	if page.Entries, err = r.Entries(ctx, recs); err != nil {
		return Page{}, err
	}
	page.Next = recs[len(recs)-1].Position
	return page, nil
}

// Wait is Read that, when the log holds no entry after after, waits up to
// wait for one: it reads once whatever wait is, then follows the log with
// the shared log follower (eventstore/follow: pausing PollMin doubling to
// PollMax between empty reads) and returns the first page with entries (or
// a full page), or, when wait has passed, an empty page whose Next is as
// far as it read. wait <= 0 is Read. A failed read fails the call. When
// stop (which may be nil) is closed, the wait ends at once as if it had
// passed: a server shutting down answers its long-polls.
func (r *Reader) Wait(ctx context.Context, after eventstore.Position, limit int, wait time.Duration, stop <-chan struct{}) (Page, error) {
	page, err := r.Read(ctx, after, limit)
	if err != nil || wait <= 0 || len(page.Entries) > 0 || page.Full {
		return page, err
	}
	wctx, end := context.WithTimeout(ctx, wait)
	defer end()
	if stop != nil {
		go func() {
			select {
			case <-stop:
				end()
			case <-wctx.Done():
			}
		}()
	}
	w := &waiter{r: r, page: page, stop: end}
	f, err := follow.New(follow.Config[struct{}]{
		Name: "feed wait", Store: r.cfg.Store, Handler: w, BatchSize: limit,
		PollMin: r.cfg.PollMin, PollMax: r.cfg.PollMax, MaxFailures: 1, Logger: quiet,
	})
	if err != nil {
		return Page{}, err
	}
	err = f.Run(wctx)
	switch {
	case w.err != nil:
		return Page{}, w.err
	case ctx.Err() != nil:
		return Page{}, ctx.Err()
	case wctx.Err() == nil: // the follower gave up: an outage
		return Page{}, fmt.Errorf("feed: wait: %w", err)
	}
	return w.page, nil // found, or waited long enough
}

// quiet is the waiting follower's logger: its outages come back as Wait's
// error, and a line per long-poll would drown serve's log.
var quiet = slog.New(slog.DiscardHandler)

// waiter is the follower's Handler while Wait waits: it maps each batch to
// entries and stops the wait at the first page that has some.
type waiter struct {
	r    *Reader
	page Page
	stop context.CancelFunc
	err  error
}

func (w *waiter) Resume(context.Context) (eventstore.Position, error) { return w.page.Next, nil }

func (w *waiter) Handle(ctx context.Context, b follow.Batch[struct{}]) (eventstore.Position, error) {
	entries, err := w.r.Entries(ctx, b.Events)
	if err != nil {
		if ctx.Err() == nil { // not merely the wait ending mid-read
			w.err = err
		}
		w.stop()
		return b.After, nil
	}
	last := b.Events[len(b.Events)-1].Position
	w.page.Next, w.page.Full = last, b.Full
	if len(entries) > 0 || b.Full {
		w.page.Entries = entries
		w.stop()
	}
	return last, nil
}

func (w *waiter) Idle(context.Context) error { return nil }

// Entries maps log events (in the log's order) to the feed's entries:
// events of streams other than operations' and events that change no
// state make none. Each entry carries its operation's head, found in recs,
// in the Reader's cache, or read from the stream's first event.
func (r *Reader) Entries(ctx context.Context, recs []eventstore.RecordedEvent) ([]Entry, error) {
	var out []Entry
	for _, rec := range recs {
		op, ok := domain.OperationIDFromStream(rec.StreamID)
		if !ok {
			continue // evidence that names no operation, and other streams
		}
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			return nil, fmt.Errorf("feed: %s@%d: %w", rec.StreamID, rec.Version, err)
		}
		if _, m := change(d.Event); m == ignored {
			continue
		}
		var h Head
		if req, ok := d.Event.(domain.OperationRequested); ok {
			h = HeadOf(req)
			r.heads.put(headItem{op: op, head: h, at: rec.Position, eventID: rec.ID})
		} else if h, err = r.headFor(ctx, op, rec); err != nil {
			return nil, err
		}
		e, ok, err := NewEntry(rec, d, op, h)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// headFor returns the head of op for its event rec: the cached one while
// rec comes after it in the log, else its stream's first event, read again.
func (r *Reader) headFor(ctx context.Context, op domain.OperationID, rec eventstore.RecordedEvent) (Head, error) {
	cached, ok := r.heads.get(op)
	if !ok {
		return r.readHead(ctx, op)
	}
	if cached.at == nil || rec.Position == nil || rec.Position.Compare(cached.at) > 0 {
		return cached.head, nil
	}
	r.heads.drop(op)
	h, err := r.readHead(ctx, op)
	if err != nil {
		return Head{}, err
	}
	if r.cfg.Regressions != nil {
		held, _ := r.heads.get(op)
		r.cfg.Regressions.ObserveRegression(ctx, eventstore.Regression{
			Cache: domain.CacheFeedHead, Stream: op.StreamName(), SeenVersion: 0, SeenEventID: cached.eventID,
			HeldVersion: rec.Version, HeldEventID: held.eventID, SeenPosition: cached.at.String(), HeldPosition: rec.Position.String(),
			Detail: fmt.Sprintf("event %s (version %d) sits at %s, before the operation's first event as the feed remembered it: the log went back; the first event was read again",
				rec.ID, rec.Version, rec.Position),
		})
	}
	return h, nil
}

// readHead reads op's head from its stream's first event, and caches it.
func (r *Reader) readHead(ctx context.Context, op domain.OperationID) (Head, error) {
	first, err := r.cfg.Store.ReadStream(ctx, op.StreamName(), 0, 1)
	if err != nil {
		return Head{}, fmt.Errorf("feed: read head of %s: %w", op, err)
	}
	if len(first) == 0 {
		return Head{}, fmt.Errorf("%w: %s is empty", ErrNoHead, op.StreamName())
	}
	d, err := codec.DecodeRecorded(first[0])
	if err != nil {
		return Head{}, fmt.Errorf("feed: head of %s: %w", op, err)
	}
	req, ok := d.Event.(domain.OperationRequested)
	if !ok {
		return Head{}, fmt.Errorf("%w: %s opens with %s", ErrNoHead, op.StreamName(), first[0].Type)
	}
	h := HeadOf(req)
	r.heads.put(headItem{op: op, head: h, at: first[0].Position, eventID: first[0].ID})
	return h, nil
}
