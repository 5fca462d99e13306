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
const DefaultSummaryEvery = 10 * time.Second

// evidenceWriter appends evidence to evidence streams under the bound.
type evidenceWriter struct {
	h     *Handler
	locks [evidenceLockStripes]sync.Mutex
	mu    sync.Mutex
	logs  map[string]*domain.EvidenceLog // folded evidence streams; bounded by maxEvidenceLogs
	sum   *summarizer
}

func newEvidenceWriter(h *Handler) *evidenceWriter {
	w := &evidenceWriter{h: h, logs: map[string]*domain.EvidenceLog{}}
	w.sum = newSummarizer(w)
	return w
}

func (w *evidenceWriter) lock(stream string) *sync.Mutex {
	f := fnv.New32a()
	_, _ = f.Write([]byte(stream))
	return &w.locks[f.Sum32()%evidenceLockStripes]
}

// cached returns a copy of the kept fold of stream, if any.
func (w *evidenceWriter) cached(stream string) *domain.EvidenceLog {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l, ok := w.logs[stream]; ok {
		return l.Clone()
	}
	return nil
}

func (w *evidenceWriter) keep(l *domain.EvidenceLog) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.logs[l.Stream]; !ok && len(w.logs) >= maxEvidenceLogs {
		for s := range w.logs { // any one: it is read again when needed
			delete(w.logs, s)
			break
		}
	}
	w.logs[l.Stream] = l.Clone()
}

func (w *evidenceWriter) forget(stream string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.logs, stream)
}

// fold reads stream whole into a fresh EvidenceLog, refusing a stream
// longer than MaxStreamEvents.
func (w *evidenceWriter) fold(ctx context.Context, stream string) (*domain.EvidenceLog, error) {
	l := domain.NewEvidenceLog(stream, w.h.cfg.EvidenceBound)
	page := w.h.cfg.ReadPage
	for {
		from := l.Version + 1
		if from >= int64(w.h.cfg.MaxStreamEvents) {
			return nil, fmt.Errorf("load %s: stream longer than %d events: refusing to load it", stream, w.h.cfg.MaxStreamEvents)
		}
		recs, err := w.h.cfg.Store.ReadStream(ctx, stream, from, page)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", stream, err)
		}
		for _, rec := range recs {
			if rec.Version != l.Version+1 {
				return nil, fmt.Errorf("%w: %s: version %d follows %d", ErrCorruptStream, stream, rec.Version, l.Version)
			}
			d, err := codec.DecodeRecorded(rec)
			if err != nil {
				return nil, fmt.Errorf("%w: %s@%d: %w", ErrCorruptStream, stream, rec.Version, err)
			}
			if err := l.Evolve(d.Event); err != nil {
				return nil, fmt.Errorf("%w: %s@%d: %v", ErrCorruptStream, stream, rec.Version, err)
			}
			l.Version = rec.Version
		}
		if len(recs) < page {
			return l, nil
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
	log := w.cached(stream)
	for try := 0; ; try++ {
		if log == nil {
			var err error
			if log, err = w.fold(ctx, stream); err != nil {
				return nil, err
			}
		}
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
			w.keep(log)
			return past, nil
		}
		_, err := w.h.appendEvents(ctx, stream, eventstore.Exact(log.Version), corr, by, w.h.cfg.Clock.Now(), one)
		if err == nil {
			trial.Version = log.Version + int64(len(one))
			w.keep(trial)
			return past, nil
		}
		w.forget(stream)
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) || try+1 >= w.h.cfg.MaxConflictRetries {
			return nil, fmt.Errorf("record evidence in %s: %w", stream, err)
		}
		// Another process appended to the evidence stream: read it again
		// (whole, so a stream that went back is read as it is) and admit
		// again on what it holds.
		log = nil
	}
}

// appendSummary appends one summary to stream, fenced by its version.
func (w *evidenceWriter) appendSummary(ctx context.Context, stream string, corr domain.CorrelationID, by Cause, s domain.RefusalsSummarized) error {
	mu := w.lock(stream)
	mu.Lock()
	defer mu.Unlock()
	log := w.cached(stream)
	for try := 0; ; try++ {
		if log == nil {
			var err error
			if log, err = w.fold(ctx, stream); err != nil {
				return err
			}
		}
		_, err := w.h.appendEvents(ctx, stream, eventstore.Exact(log.Version), corr, by, w.h.cfg.Clock.Now(), []domain.Event{s})
		if err == nil {
			log.Version++
			w.keep(log)
			return nil
		}
		w.forget(stream)
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) || try+1 >= w.h.cfg.MaxConflictRetries {
			return fmt.Errorf("record evidence in %s: %w", stream, err)
		}
		log = nil
	}
}
