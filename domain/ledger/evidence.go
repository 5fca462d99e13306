package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
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
		return evidenceEntry{log: e.log.Clone(), msgs: e.msgs, lastID: e.lastID}
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
	w.logs[e.log.Stream] = evidenceEntry{log: e.log.Clone(), msgs: e.msgs, lastID: e.lastID}
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
	if e, err = w.fold(ctx, stream); err != nil {
		return false, err
	}
	w.keep(e)
	_, ok := e.msgs[msg]
	return ok, nil
}

func (w *evidenceWriter) forget(stream string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.logs, stream)
}

// fold reads stream whole into a fresh EvidenceLog, refusing a stream
// longer than MaxStreamEvents.
func (w *evidenceWriter) fold(ctx context.Context, stream string) (evidenceEntry, error) {
	l := domain.NewEvidenceLog(stream, w.h.cfg.EvidenceBound)
	msgs := map[domain.MessageID]struct{}{}
	lastID := ""
	page := w.h.cfg.ReadPage
	for {
		from := l.Version + 1
		if from >= int64(w.h.cfg.MaxStreamEvents) {
			return evidenceEntry{}, fmt.Errorf("load %s: stream longer than %d events: refusing to load it", stream, w.h.cfg.MaxStreamEvents)
		}
		recs, err := w.h.cfg.Store.ReadStream(ctx, stream, from, page)
		if err != nil {
			return evidenceEntry{}, fmt.Errorf("load %s: %w", stream, err)
		}
		for _, rec := range recs {
			if rec.Version != l.Version+1 {
				return evidenceEntry{}, fmt.Errorf("%w: %s: version %d follows %d", ErrCorruptStream, stream, rec.Version, l.Version)
			}
			d, err := codec.DecodeRecorded(rec)
			if err != nil {
				return evidenceEntry{}, fmt.Errorf("%w: %s@%d: %w", ErrCorruptStream, stream, rec.Version, err)
			}
			if err := l.Evolve(d.Event); err != nil {
				return evidenceEntry{}, fmt.Errorf("%w: %s@%d: %v", ErrCorruptStream, stream, rec.Version, err)
			}
			if m := messageOf(d.Event); m != "" {
				msgs[m] = struct{}{}
			}
			l.Version, lastID = rec.Version, rec.ID
		}
		if len(recs) < page {
			return evidenceEntry{log: l, msgs: msgs, lastID: lastID}, nil
		}
	}
}

// pastBound is a refusal past the bound, to be counted into a summary of
// key in the window starting at window.
type pastBound struct {
	event  domain.Event
	key    domain.EvidenceKey
	window time.Time
}

// record appends evidence about op to stream: each refusal within the
// bound one by one (fenced by the stream's version), each past it counted
// into a summary, which it waits for (see summarizer). It returns once
// every refusal is recorded, by event or by count, or with the store's
// error.
func (w *evidenceWriter) record(ctx context.Context, op domain.OperationID, stream string, corr domain.CorrelationID, by Cause, evidence []domain.Event) error {
	past, err := w.appendOneByOne(ctx, stream, corr, by, evidence)
	if err != nil {
		return err
	}
	for _, p := range past {
		if err := w.sum.count(ctx, op, stream, corr, p, by.Actor); err != nil {
			return err
		}
	}
	return nil
}

// appendOneByOne appends the refusals of evidence the bound admits one by
// one and returns the others.
func (w *evidenceWriter) appendOneByOne(ctx context.Context, stream string, corr domain.CorrelationID, by Cause, evidence []domain.Event) ([]pastBound, error) {
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
		last, err := w.h.appendEvents(ctx, stream, eventstore.Exact(log.Version), corr, by, w.h.cfg.Clock.Now(), one)
		if err == nil {
			trial.Version = log.Version + int64(len(one))
			w.keep(evidenceEntry{log: trial, msgs: cur.withMessages(one), lastID: last})
			return past, nil
		}
		w.forget(stream)
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) || try+1 >= w.h.cfg.MaxConflictRetries {
			return nil, fmt.Errorf("record evidence in %s: %w", stream, err)
		}
		// Another process appended to the evidence stream: read it again
		// (whole, so a stream that went back is read as it is) and admit
		// again on what it holds.
		cur = evidenceEntry{}
	}
}

// appendSummary appends one summary to stream, fenced by its version.
func (w *evidenceWriter) appendSummary(ctx context.Context, stream string, corr domain.CorrelationID, by Cause, s domain.RefusalsSummarized) error {
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
		last, err := w.h.appendEvents(ctx, stream, eventstore.Exact(cur.log.Version), corr, by, w.h.cfg.Clock.Now(), []domain.Event{s})
		if err == nil {
			cur.log.Version++
			cur.lastID = last
			w.keep(cur)
			return nil
		}
		w.forget(stream)
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) || try+1 >= w.h.cfg.MaxConflictRetries {
			return fmt.Errorf("record evidence in %s: %w", stream, err)
		}
		cur = evidenceEntry{}
	}
}
