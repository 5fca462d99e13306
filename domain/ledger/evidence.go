package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"opledger/domain"
	"opledger/eventstore"
)

// Evidence of what others present to an operation — a refused claim, a
// duplicate delivery, a refused executor write — is appended to the
// operation's evidence stream (domain.EvidenceStreamOf), never to its
// stream: it changes nothing the operation decides on, so it must not move
// the version the lease holder's renewal and outcome append at (invariant
// 14). Appends there are fenced by the evidence stream's own version, which
// keeps the evidence bound exact (domain.EvidenceLog decides, from the
// stream, what is recorded one by one and what is counted into a
// RefusalsSummarized) and the evidence in the order the handler admitted it,
// each stream with its own hash chain. Within one handler the appends of
// one evidence stream are serialised (a striped lock), so hostile
// presentations contend with each other there — across processes they
// conflict and catch up — and never with the operation's state writes.

// evidenceLockStripes is how many locks serialise evidence appends of one
// handler: streams hashing to one stripe share it.
const evidenceLockStripes = 64

// maxEvidenceLogs bounds how many evidence streams' folds one handler
// keeps; one it drops is read again from its stream when next needed.
const maxEvidenceLogs = 4096

// DefaultSummaryEvery is Config.SummaryEvery's default.
// Five seconds keeps a caller waiting for its summary well within a
// request's deadline (10 s), and an evidence stream's summaries of one key
// to 721 an hour per handler instance.
const DefaultSummaryEvery = 5 * time.Second

// evidenceWriter appends evidence to evidence streams under the bound.
type evidenceWriter struct {
	h     *Handler
	locks [evidenceLockStripes]sync.Mutex
	mu    sync.Mutex
	logs  map[string]evidenceEntry // folded evidence streams; bounded by maxEvidenceLogs
	sum   *summarizer
}

// evidenceEntry is a folded evidence stream: the bound's counts, and the
// message ids its refusals recorded one by one name (a message refused
// once is a duplicate when delivered again). msgs is never changed once
// kept: an entry that gains ids gets a new map.
type evidenceEntry struct {
	log    *domain.EvidenceLog
	msgs   map[domain.MessageID]struct{}
	lastID string // the id of the event at log.Version ("" when none)
	// snapshotAt is the version of the newest snapshot of the stream the
	// handler found, kept or tried to keep (-1: none); the next is kept
	// SnapshotEvery events past it (evidence_snapshot.go).
	snapshotAt int64
}

// withMessages returns e's ids and those of events, sharing e's map when
// events name no new one.
func (e evidenceEntry) withMessages(events []domain.Event) map[domain.MessageID]struct{} {
	msgs := e.msgs
	copied := false
	for _, ev := range events {
		m := messageOf(ev)
		if m == "" {
			continue
		}
		if _, ok := msgs[m]; ok {
			continue
		}
		if !copied {
			msgs = make(map[domain.MessageID]struct{}, len(e.msgs)+len(events))
			for k := range e.msgs {
				msgs[k] = struct{}{}
			}
			copied = true
		}
		msgs[m] = struct{}{}
	}
	return msgs
}

// holdsDuplicates reports whether e records one by one the refusal of
// every message a DeliveryDuplicated of evidence names that state (nil:
// none) does not: such a duplicate was decided on that refusal.
func (e evidenceEntry) holdsDuplicates(evidence []domain.Event, state *domain.Operation) bool {
	for _, ev := range evidence {
		d, ok := ev.(domain.DeliveryDuplicated)
		if !ok {
			continue
		}
		if state != nil {
			if _, known := state.Messages[d.MessageID]; known {
				continue
			}
		}
		if _, seen := e.msgs[d.MessageID]; !seen {
			return false
		}
	}
	return true
}

// messageOf is the message a refused presentation or duplicate names.
func messageOf(e domain.Event) domain.MessageID {
	switch ev := e.(type) {
	case domain.PresentationRejected:
		return ev.MessageID
	case domain.DeliveryDuplicated:
		return ev.MessageID
	}
	return ""
}

func newEvidenceWriter(h *Handler) *evidenceWriter {
	w := &evidenceWriter{h: h, logs: map[string]evidenceEntry{}}
	w.sum = newSummarizer(w)
	return w
}

func (w *evidenceWriter) lock(stream string) *sync.Mutex {
	f := fnv.New32a()
	_, _ = f.Write([]byte(stream))
	return &w.locks[f.Sum32()%evidenceLockStripes]
}

// cached returns a copy of the kept fold of stream, if any (log nil: none).
func (w *evidenceWriter) cached(stream string) evidenceEntry {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.logs[stream]; ok {
		e.log = e.log.Clone()
		return e
	}
	return evidenceEntry{}
}

func (w *evidenceWriter) keep(e evidenceEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.logs[e.log.Stream]; !ok && len(w.logs) >= maxEvidenceLogs {
		for s := range w.logs { // any one: it is read again when needed
			delete(w.logs, s)
			break
		}
	}
	e.log = e.log.Clone()
	w.logs[e.log.Stream] = e
}

// entry returns stream's fold, reading the stream when none is kept.
func (w *evidenceWriter) entry(ctx context.Context, stream string) (evidenceEntry, error) {
	if e := w.cached(stream); e.log != nil {
		return e, nil
	}
	e, err := w.fold(ctx, stream)
	if err != nil {
		return evidenceEntry{}, err
	}
	w.keep(e)
	return e, nil
}

// seenMessage reports whether op's evidence stream records a refusal of
// message msg one by one: as the handler knows the stream, which a
// presentation of msg decided meanwhile elsewhere may have passed (it is
// then refused again rather than answered a duplicate — either way nothing
// is executed).
//
// A message it finds is checked against the stream: the stream must still
// hold the fold's last event (one row read), else the stream went back (a
// failover that lost writes) and is read again whole — a duplicate is
// never answered on a presentation the log no longer holds.
func (w *evidenceWriter) seenMessage(ctx context.Context, op domain.OperationID, msg domain.MessageID) (bool, error) {
	stream := domain.EvidenceStreamOf(op)
	e, err := w.entry(ctx, stream)
	if err != nil {
		return false, err
	}
	if _, ok := e.msgs[msg]; !ok {
		return false, nil
	}
	page, err := w.h.cfg.Store.ReadStream(ctx, stream, e.log.Version, 1)
	if err != nil {
		return false, fmt.Errorf("load %s: %w", stream, err)
	}
	if len(page) == 1 && page[0].ID == e.lastID {
		return true, nil
	}
	w.forget(stream)
	seen := e
	e, err = w.fold(ctx, stream)
	w.regressed(ctx, stream, seen, page, e, err)
	if err != nil {
		return false, err
	}
	w.keep(e)
	_, ok := e.msgs[msg]
	return ok, nil
}

// regressed tells Config.Regressions that stream no longer holds the event
// seen, a fold the handler kept, ended at: page is what the stream holds
// from that version on (its first event, if any, is there instead), held
// the stream folded again (or err, reading it).
func (w *evidenceWriter) regressed(ctx context.Context, stream string, seen evidenceEntry, page []eventstore.RecordedEvent, held evidenceEntry, err error) {
	r := eventstore.Regression{Cache: w.h.cfg.CacheName, Stream: stream, SeenVersion: seen.log.Version, SeenEventID: seen.lastID,
		HeldVersion: eventstore.NoStreamVersion}
	if len(page) > 0 && page[0].Version == seen.log.Version {
		r.HeldEventID = page[0].ID
	}
	r.Detail = fmt.Sprintf("%s went back: it no longer holds event %s at version %d, which this handler's evidence fold ended at", stream, seen.lastID, seen.log.Version)
	if err == nil {
		r.HeldVersion = held.log.Version
	} else {
		r.Detail += fmt.Sprintf("; reading it again failed: %v", err)
	}
	w.h.cfg.Regressions.ObserveRegression(ctx, r)
}

func (w *evidenceWriter) forget(stream string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.logs, stream)
}

// pastBound is a refusal past the bound, to be counted into a summary of
// key in the window starting at window.
type pastBound struct {
	event  domain.Event
	key    domain.EvidenceKey
	window time.Time
	fence  eventstore.Fence // the operation's event it was decided on
}

// decidedOn is what evidence was decided on: the operation's state (nil
// for the unattributed) and the fence of its last event (zero when none).
type decidedOn struct {
	state *domain.Operation
	fence eventstore.Fence
}

// errEvidenceStale refuses evidence decided on an evidence stream that no
// longer holds what it was decided on: a duplicate of a message whose
// refusal the stream lost, a summary of refusals past a bound the stream
// no longer reaches (a failover). The command decides again.
var errEvidenceStale = errors.New("evidence decided on a refusal the evidence stream no longer holds")

// mustDecideAgain reports whether err, from record, means the evidence was
// decided on a state the log no longer holds: the operation's event it was
// decided on is gone (eventstore.ErrFenceGone) or the refusal a duplicate
// named is (errEvidenceStale). Nothing was recorded; the command decides
// again on what the log holds.
func mustDecideAgain(err error) bool {
	return errors.Is(err, eventstore.ErrFenceGone) || errors.Is(err, errEvidenceStale)
}

// record appends evidence about op to stream: each refusal within the
// bound one by one (fenced by the stream's version), each past it counted
// into a summary, which it waits for (see summarizer). It returns once
// every refusal is recorded, by event or by count, or with the store's
// error.
//
// on is what the evidence was decided on: every append of it, summaries
// included, is refused once the log no longer holds the operation's event
// it was decided on, and a duplicate of a message the operation's state
// does not name once the evidence stream no longer holds its refusal (see
// mustDecideAgain), so no evidence outlives the history it was decided on.
func (w *evidenceWriter) record(ctx context.Context, op domain.OperationID, stream string, corr domain.CorrelationID, by Cause, evidence []domain.Event, on decidedOn) error {
	past, err := w.appendOneByOne(ctx, stream, corr, by, evidence, on)
	if err != nil {
		return err
	}
	for _, p := range past {
		p.fence = on.fence
		if err := w.sum.count(ctx, op, stream, corr, p, by.Actor); err != nil {
			return err
		}
	}
	return nil
}

// appendOneByOne appends the refusals of evidence the bound admits one by
// one and returns the others.
func (w *evidenceWriter) appendOneByOne(ctx context.Context, stream string, corr domain.CorrelationID, by Cause, evidence []domain.Event, on decidedOn) ([]pastBound, error) {
	mu := w.lock(stream)
	mu.Lock()
	defer mu.Unlock()
	cur := w.cached(stream)
	for try := 0; ; try++ {
		if cur.log == nil {
			var err error
			if cur, err = w.fold(ctx, stream); err != nil {
				return nil, err
			}
		}
		if !cur.holdsDuplicates(evidence, on.state) {
			w.forget(stream)
			return nil, fmt.Errorf("record evidence in %s: %w", stream, errEvidenceStale)
		}
		log := cur.log
		trial := log.Clone()
		var one []domain.Event
		var past []pastBound
		for _, e := range evidence {
			key, at, ok := domain.EvidenceKeyOf(e, trial.Unattributed)
			if !ok {
				return nil, fmt.Errorf("record evidence: %s is not a refusal", e.EventType())
			}
			admit, skey, window := trial.Admit(key, at)
			if !admit {
				past = append(past, pastBound{event: e, key: skey, window: window})
				continue
			}
			_ = trial.Evolve(e) // a refusal: Evolve refuses only other types
			one = append(one, e)
		}
		if len(one) == 0 {
			w.keep(cur)
			return past, nil
		}
		last, err := w.h.appendEvents(ctx, stream, eventstore.Exact(log.Version).Beside(on.fence), corr, by, w.h.cfg.Clock.Now(), one)
		if err == nil {
			trial.Version = log.Version + int64(len(one))
			w.keep(w.snapshotAppended(ctx, evidenceEntry{log: trial, msgs: cur.withMessages(one), lastID: last, snapshotAt: cur.snapshotAt}))
			return past, nil
		}
		w.forget(stream)
		if errors.Is(err, eventstore.ErrFenceGone) || !errors.Is(err, eventstore.ErrWrongExpectedVersion) || try+1 >= w.h.cfg.MaxConflictRetries {
			return nil, fmt.Errorf("record evidence in %s: %w", stream, err)
		}
		// Another process appended to the evidence stream: fold what it
		// appended (from cur's last event on; a stream that went back is
		// folded afresh) and admit again on what the stream holds.
		if cur, err = w.catchUp(ctx, stream, cur); err != nil {
			return nil, err
		}
	}
}

// appendSummary appends one summary to stream, fenced by its version and
// by fence, the latest operation event one of its refusals was decided on.
func (w *evidenceWriter) appendSummary(ctx context.Context, stream string, corr domain.CorrelationID, by Cause, s domain.RefusalsSummarized, fence eventstore.Fence) error {
	mu := w.lock(stream)
	mu.Lock()
	defer mu.Unlock()
	cur := w.cached(stream)
	for try := 0; ; try++ {
		if cur.log == nil {
			var err error
			if cur, err = w.fold(ctx, stream); err != nil {
				return err
			}
		}
		if past, _ := cur.log.PastBound(domain.EvidenceKey{Scope: s.Scope, ID: s.ScopeID}, s.WindowStart); !past {
			// The stream no longer holds the refusals that reached the
			// bound (it went back): its callers decide again, and are
			// recorded one by one within the bound.
			return fmt.Errorf("record evidence in %s: a summary of %s/%s: %w", stream, s.Scope, s.ScopeID, errEvidenceStale)
		}
		last, err := w.h.appendEvents(ctx, stream, eventstore.Exact(cur.log.Version).Beside(fence), corr, by, w.h.cfg.Clock.Now(), []domain.Event{s})
		if err == nil {
			cur.log.Version++
			cur.lastID = last
			w.keep(w.snapshotAppended(ctx, cur))
			return nil
		}
		w.forget(stream)
		if errors.Is(err, eventstore.ErrFenceGone) || !errors.Is(err, eventstore.ErrWrongExpectedVersion) || try+1 >= w.h.cfg.MaxConflictRetries {
			return fmt.Errorf("record evidence in %s: %w", stream, err)
		}
		if cur, err = w.catchUp(ctx, stream, cur); err != nil {
			return err
		}
	}
}
