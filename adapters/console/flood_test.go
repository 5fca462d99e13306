package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/adapters/console"
	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// opFlood is claimed by worker-e; 5,000 refused outcome writes from a
// worker without its lease secret follow, then worker-e's genuine
// OutcomeRecorded, then 5,000 presentations of its spent capability.
const opFlood domain.OperationID = "OP-4475"

// floodRefusals is how many refusals surround the genuine outcome, half
// before it, half after.
const floodRefusals = 10_000

// flood writes opFlood. The refusals are appended a thousand at a time
// (the store's batch bound), as the ledger records them one by one.
func (s *served) flood() {
	s.t.Helper()
	ctx, w := s.t.Context(), s.world
	r, err := w.Approve(ctx, opFlood, "ORD-8845", 3000)
	require.NoError(s.t, err)
	claim, err := w.Ledger.Claim(ctx, opFlood, domain.Claim{MessageID: "MSG-71C", CorrelationID: "COR-OP-4475", CapabilityID: r.Capability,
		WorkerID: "worker-e"})
	require.NoError(s.t, err)
	require.Equal(s.t, domain.StatusClaimed, claim.Status)
	x := claim.ExecutionID
	at := w.Clock.Now()
	s.appendEvidence(floodRefusals/2, func(i int) (domain.Event, string) {
		return domain.WriteRefused{ExecutionID: x, Command: "RecordOutcome", Reason: domain.ReasonLeaseNotHeld, LeaseEpoch: 1, CurrentEpoch: 1,
			Outcome: domain.Completed, ProviderReference: "re_forged", SecretCheck: domain.SecretMissing, RefusedAt: at}, fmt.Sprintf("worker-h%d", i%3)
	})
	require.NoError(s.t, w.Ledger.RecordOutcome(ctx, opFlood, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: claim.LeaseSecret,
		Outcome: domain.Completed, ProviderReference: "re_genuine_4475"}, ledger.Cause{Actor: "worker-e"}))
	s.appendEvidence(floodRefusals/2, func(i int) (domain.Event, string) {
		return domain.PresentationRejected{Status: domain.StatusAlreadyConsumed, Reason: domain.ReasonCapabilityAlreadyConsumed,
			MessageID: domain.MessageID(fmt.Sprintf("MSG-R%05d", i)), CapabilityID: r.Capability, OperationID: opFlood, WorkerID: "worker-h9",
			ExecutionID: x, ReplaySuspected: true, RejectedAt: at}, "worker-h9"
	})
}

// appendEvidence appends n evidence events to opFlood's stream.
func (s *served) appendEvidence(n int, event func(i int) (domain.Event, string)) {
	s.t.Helper()
	ctx, store := s.t.Context(), s.world.Ledger.Store()
	for done := 0; done < n; {
		version := s.streamVersion()
		var batch []eventstore.EventData
		for ; done < n && len(batch) < eventstore.MaxAppendBatch; done++ {
			e, actor := event(done)
			d, err := codec.EncodeEvent(uuid.NewString(), e, domain.Metadata{CorrelationID: "COR-OP-4475", Actor: actor, RecordedAt: s.world.Clock.Now()})
			require.NoError(s.t, err)
			batch = append(batch, d)
		}
		_, err := store.Append(ctx, opFlood.StreamName(), eventstore.Exact(version), batch)
		require.NoError(s.t, err)
	}
}

// streamVersion is opFlood's stream version.
func (s *served) streamVersion() int64 {
	s.t.Helper()
	st, err := s.world.State(s.t.Context(), opFlood)
	require.NoError(s.t, err)
	return st.Version
}

// countingStore counts the events read from operation streams.
type countingStore struct {
	eventstore.Store
	read atomic.Int64
}

func (c *countingStore) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	evs, err := c.Store.ReadStream(ctx, stream, from, limit)
	c.read.Add(int64(len(evs)))
	return evs, err
}

// TestAFloodOfRefusalsHidesNothing: an operation whose genuine outcome is
// surrounded by 10,000 refusals. Its page shows the outcome in the diagram
// and the events table, each run of refusals as one counted line that
// expands on demand, one page of its events at a time; the page is small;
// a view or a live update after the first reads only what the stream
// gained since (the last event it knows, and the new ones).
func TestAFloodOfRefusalsHidesNothing(t *testing.T) {
	alloc := newBrowser(t) // skips loudly when no browser can be had
	s := newServed(t)
	s.flood()
	counting := &countingStore{Store: s.world.Ledger.Store()}
	cfg := s.cfg
	cfg.Events = counting
	cfg.RequestTimeout = 2 * time.Minute // the first view reads 10,000 events, under the race detector on a shared machine
	ui, err := console.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(ui)
	t.Cleanup(srv.Close)
	path := "/ui/operations/" + string(opFlood)

	b := s.browser(srv.URL)
	b.signIn(httpapi.RoleAuditor)
	began := time.Now()
	p := b.get(path)
	first := time.Since(began)
	require.Equal(t, http.StatusOK, p.status)
	began = time.Now()
	again := b.get(path)
	second := time.Since(began)
	require.Equal(t, http.StatusOK, again.status)
	t.Logf("operation page at %d refusals: %d bytes; first view %s, the next %s (figures, not asserted)", floodRefusals, len(p.body),
		first.Round(time.Millisecond), second.Round(time.Millisecond))
	require.Less(t, len(p.body), 200<<10, "the page's size does not follow the refusals")
	text := p.text()
	require.Contains(t, text, "OutcomeRecorded")
	require.Contains(t, text, "re_genuine_4475")
	require.Contains(t, text, "5,000 refusals (#4–#5,003: WriteRefused ×5,000)")
	require.Contains(t, text, "5,000 refusals (#5,005–#10,004: PresentationRejected ×5,000)")
	require.Contains(t, text, "5,000 with replay suspected")

	// Live updates read what changed: nothing, then one refusal more.
	counting.read.Store(0)
	frag := b.get(path, "X-Console-Fragment", "main")
	require.Equal(t, http.StatusOK, frag.status)
	require.LessOrEqual(t, counting.read.Load(), int64(2), "a poll with nothing new reads the last event it knows of each stream, no more")
	out, err := s.world.Ledger.Claim(t.Context(), opFlood, domain.Claim{MessageID: "MSG-R99999", CorrelationID: "COR-OP-4475",
		CapabilityID: s.capOf(opFlood), WorkerID: "worker-h9"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusAlreadyConsumed, out.Status)
	counting.read.Store(0)
	frag = b.get(path, "X-Console-Fragment", "main")
	require.LessOrEqual(t, counting.read.Load(), int64(2), "a poll reads the last event it knows of each stream, and the one new")
	// This build records the new refusal in the evidence stream: a run of
	// its own after the 5,000 an earlier build recorded in the operation's.
	require.Contains(t, frag.text(), "5,000 refusals (#5,005–#10,004: PresentationRejected ×5,000)")
	require.Contains(t, frag.text(), "MSG-R99999")

	// In the browser: the diagram and the table show the outcome; a run
	// expands on demand.
	tab := newTab(t, alloc, srv.URL)
	tab.signIn(httpapi.RoleAuditor)
	require.EqualValues(t, 200, tab.open(path))
	labels := eval[[]string](tab, `Array.from(document.querySelectorAll('svg.seq g.step .label')).map(e => e.textContent)`)
	require.Less(t, len(labels), 30, "a run of refusals is one step: %q", labels)
	joined := strings.Join(labels, "\n")
	require.Contains(t, joined, "OutcomeRecorded Completed")
	require.Contains(t, joined, "5,000 refusals")
	require.Contains(t, joined, "refused: AlreadyConsumed")
	require.True(t, eval[bool](tab, `[...document.querySelectorAll('table.events tr.event')].some(r => r.textContent.includes('OutcomeRecorded') && r.textContent.includes('re_genuine_4475'))`),
		"the events table lists the genuine outcome")
	require.Equal(t, 2, eval[int](tab, `document.querySelectorAll('table.events tr.group').length`))

	require.EqualValues(t, 200, tab.submit(chromedp.Click(chromedp.CSS(`#group-4 a.expand`))))
	require.Equal(t, 200, eval[int](tab, `[...document.querySelectorAll('table.events tr.event')].filter(r => r.textContent.includes('WriteRefused')).length`),
		"one page of the run's refusals")
	require.Contains(t, tab.text("#group-4"), "Collapse")
	require.True(t, eval[bool](tab, `!!document.querySelector('table.events a.next')`), "the next page of the run")
	require.True(t, eval[bool](tab, `[...document.querySelectorAll('table.events tr.event')].some(r => r.textContent.includes('re_genuine_4475'))`),
		"the outcome is still listed")
	require.EqualValues(t, 200, tab.submit(chromedp.Click(chromedp.CSS(`table.events a.next`))))
	require.True(t, eval[bool](tab, `!!document.querySelector('#event-204') && !document.querySelector('#event-203')`), "the run's second page")
}

// capOf is op's first capability.
func (s *served) capOf(op domain.OperationID) domain.CapabilityID {
	s.t.Helper()
	st, err := s.world.State(s.t.Context(), op)
	require.NoError(s.t, err)
	for id := range st.Capabilities {
		return id
	}
	s.t.Fatalf("%s has no capability", op)
	return ""
}
