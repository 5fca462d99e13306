package ledger

import (
	"context"
	"sync"
	"time"

	"opledger/domain"
	"opledger/eventstore"
)

// SummaryActor is the actor of a RefusalsSummarized: the ledger counted
// the refusals; the principals who caused them are in its data.
const SummaryActor = "opledger-ledger"

// summaryAppendTimeout bounds one summary's append, which no caller's
// context governs (a summary counts the refusals of many callers).
const summaryAppendTimeout = 30 * time.Second

// maxSummaryQueues bounds the summary queues one handler keeps; idle ones
// are dropped past it.
const maxSummaryQueues = 4096

// summarizer counts refusals past the bound into summaries: per evidence
// stream, key and window, at most one summary every Config.SummaryEvery
// (of real time, in this handler). A refusal past the bound joins the
// summary being gathered — the first one starts it, to be appended once
// SummaryEvery has passed since the key's last — and its caller waits
// until that summary is recorded: a refusal is answered only once it is
// counted in the log (never dropped), and its caller, not the ledger,
// pays for the rate. So an evidence stream gains, per key and window, at
// most one summary per SummaryEvery per handler instance, whatever the
// number of callers (a summary's size is bounded: domain.SummaryBuilder).
type summarizer struct {
	w      *evidenceWriter
	mu     sync.Mutex
	queues map[summaryKey]*summaryQueue
}

type summaryKey struct {
	stream string
	key    domain.EvidenceKey
	window time.Time
}

type summaryQueue struct {
	next *summaryBatch // gathering, nil when none
	last time.Time     // when the last summary was appended (monotonic)
}

type summaryBatch struct {
	b     *domain.SummaryBuilder
	corr  domain.CorrelationID
	fence eventstore.Fence // the latest operation event a refusal counted was decided on
	done  chan struct{}
	err   error // set before done is closed
}

func newSummarizer(w *evidenceWriter) *summarizer {
	return &summarizer{w: w, queues: map[summaryKey]*summaryQueue{}}
}

// count adds refusal p, caused by principal, to the summary being gathered
// for its key and window, and waits until that summary is recorded (or
// ctx ends: the refusal is counted all the same). The caller whose refusal
// starts a batch waits out SummaryEvery and appends it.
func (s *summarizer) count(ctx context.Context, op domain.OperationID, stream string, corr domain.CorrelationID, p pastBound, principal string) error {
	k := summaryKey{stream: stream, key: p.key, window: p.window}
	s.mu.Lock()
	q := s.queues[k]
	if q == nil {
		s.prune()
		q = &summaryQueue{}
		s.queues[k] = q
	}
	b := q.next
	if b == nil {
		b = &summaryBatch{b: domain.NewSummaryBuilder(op, p.key, p.window, s.w.h.cfg.EvidenceBound), corr: corr, done: make(chan struct{})}
		q.next = b
		var wait time.Duration
		if !q.last.IsZero() {
			wait = s.w.h.cfg.SummaryEvery - time.Since(q.last)
		}
		err := b.b.Add(p.event, principal)
		b.fenceAt(p.fence)
		s.mu.Unlock()
		if err != nil {
			// Nothing counted: the batch is appended without it.
			s.flush(k, q, b, wait)
			return err
		}
		// The first refusal of a batch appends it, in its own goroutine
		// (no other the caller did not start touches the store).
		s.flush(k, q, b, wait)
		return b.err
	}
	err := b.b.Add(p.event, principal)
	b.fenceAt(p.fence)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush appends batch b after wait, and tells its callers. It waits and
// appends whatever its caller's context: the batch counts others' refusals.
func (s *summarizer) flush(k summaryKey, q *summaryQueue, b *summaryBatch, wait time.Duration) {
	if wait > 0 {
		<-s.w.h.cfg.After(wait)
	}
	s.mu.Lock()
	if q.next == b {
		q.next = nil // later refusals gather into the next summary
	}
	if b.b.Count() == 0 {
		s.mu.Unlock()
		close(b.done)
		return
	}
	summary := b.b.Summary(s.w.h.cfg.Clock.Now())
	fence := b.fence
	q.last = time.Now()
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), summaryAppendTimeout)
	defer cancel()
	b.err = s.w.appendSummary(ctx, k.stream, b.corr, Cause{Actor: SummaryActor}, summary, fence)
	s.mu.Lock()
	q.last = time.Now()
	s.mu.Unlock()
	close(b.done)
}

// fenceAt makes f the batch's fence when it is later than the one it has:
// an operation's versions only grow, so a log that holds the latest event
// a refusal was decided on holds the earlier ones. The caller holds s.mu.
func (b *summaryBatch) fenceAt(f eventstore.Fence) {
	if f.Stream != "" && (b.fence.Stream == "" || f.Version > b.fence.Version) {
		b.fence = f
	}
}

// prune drops idle queues whose last summary is older than SummaryEvery
// once there are maxSummaryQueues of them. The caller holds s.mu.
func (s *summarizer) prune() {
	if len(s.queues) < maxSummaryQueues {
		return
	}
	for k, q := range s.queues {
		if q.next == nil && time.Since(q.last) >= s.w.h.cfg.SummaryEvery {
			delete(s.queues, k)
		}
	}
}
