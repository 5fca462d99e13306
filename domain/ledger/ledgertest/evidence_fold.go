package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// The tests of folding a long evidence stream: no fold of it reads the
// whole stream — a conflict folds what the other handler appended, a cold
// fold starts from a snapshot that matches the stream — so a flood that
// outlasts MaxStreamEvents leaves the operation claimable.

// floodBound records every refusal of these tests one by one, so that a
// stream grows by one event per presentation.
var floodBound = domain.EvidenceBound{Window: time.Hour, PerKey: 10_000, PerStream: 10_000}

// foldLimits are the handlers' limits in these tests: a fold reads at most
// foldMaxEvents events after its snapshot, in pages of foldPage, and a
// snapshot is kept every foldSnapshotEvery events.
const (
	foldMaxEvents     = 200
	foldPage          = 20
	foldSnapshotEvery = 50
)

func foldLimits(c *ledger.Config) {
	c.EvidenceBound = floodBound
	c.MaxStreamEvents = foldMaxEvents
	c.ReadPage = foldPage
	c.SnapshotEvery = foldSnapshotEvery
}

// streamReads is a store that records the reads of one stream: where
// each began and how many events it returned.
type streamReads struct {
	eventstore.Store
	stream string
	mu     sync.Mutex
	reads  []streamRead
}

type streamRead struct {
	from int64
	rows int
}

func (c *streamReads) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	recs, err := c.Store.ReadStream(ctx, stream, from, limit)
	if stream == c.stream {
		c.mu.Lock()
		c.reads = append(c.reads, streamRead{from: from, rows: len(recs)})
		c.mu.Unlock()
	}
	return recs, err
}

// take returns the reads recorded since the last take.
func (c *streamReads) take() []streamRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = nil
	return r
}

func rowsRead(reads []streamRead) int {
	n := 0
	for _, r := range reads {
		n += r.rows
	}
	return n
}

// replays presents the spent capability c under messages prefix-from ..
// prefix-(to-1), each refused and recorded one by one.
func (h *Harness) replays(hd *ledger.Handler, c domain.CapabilityID, prefix string, from, to int) {
	h.T.Helper()
	for i := from; i < to; i++ {
		out := h.Claim(hd, domain.MessageID(fmt.Sprintf("%s-%d", prefix, i)), c, "worker-z")
		require.Equal(h.T, domain.StatusAlreadyConsumed, out.Status)
	}
}

// evidenceVersion is the version of the evidence stream's last event.
func (h *Harness) evidenceVersion() int64 {
	h.T.Helper()
	recs, err := h.Store.ReadStream(context.Background(), domain.EvidenceStreamOf(h.Op), 0, 100_000)
	require.NoError(h.T, err)
	return int64(len(recs)) - 1
}

func requireSnapshots(t *testing.T, h *Harness) {
	if h.Snapshots == nil {
		t.Skip("the backend keeps no snapshots")
	}
}

// longEvidenceStreamStaysClaimable: a flood leaves an evidence stream
// longer than MaxStreamEvents. A handler with an empty cache still folds
// it — from the snapshot the flooding handler kept, reading a page of
// events after it — and answers on it: a replay refused and recorded, a
// message refused before answered a duplicate, and, once the attempt
// failed and new authority is issued, the worker's claim Claimed. A
// handler that keeps no snapshots refuses the fold (MaxStreamEvents
// bounds what one fold reads).
func longEvidenceStreamStaysClaimable(t *testing.T, b Backend) {
	ctx := context.Background()
	h := NewHarness(t, b)
	requireSnapshots(t, h)
	h.Allow(OKFacts)
	capID := h.Issue()
	flood := h.HandlerWith(h.Store, foldLimits)
	claimed := h.Claim(flood, "MSG-1", capID, "worker-a")
	require.Equal(t, domain.StatusClaimed, claimed.Status)
	warm := h.HandlerWith(h.Store, foldLimits)
	h.replays(warm, capID, "MSG-W", 0, 1) // its fold is kept at version 0
	const n = foldMaxEvents + 3*foldSnapshotEvery
	h.replays(flood, capID, "MSG-R", 1, n)
	require.EqualValues(t, n-1, h.evidenceVersion())

	reads := &streamReads{Store: h.Store, stream: domain.EvidenceStreamOf(h.Op)}
	fresh := h.HandlerWith(reads, foldLimits)
	out := h.Claim(fresh, "MSG-NEW", capID, "worker-z")
	require.Equal(t, domain.StatusAlreadyConsumed, out.Status)
	require.EqualValues(t, n, h.evidenceVersion(), "the replay is recorded")
	folded := reads.take()
	t.Logf("cold fold of a %d-event evidence stream: %d reads, %d events: %v", n, len(folded), rowsRead(folded), folded)
	require.Less(t, rowsRead(folded), foldMaxEvents, "the cold fold read the snapshot's event and what follows it, not the stream: %v", folded)

	// A handler whose kept fold is more events behind than one fold may
	// read starts again from the snapshot.
	require.Equal(t, domain.StatusAlreadyConsumed, h.Claim(warm, "MSG-W-1", capID, "worker-w").Status)
	require.EqualValues(t, n+1, h.evidenceVersion(), "the warm handler's replay is recorded")

	again := h.Claim(h.HandlerWith(h.Store, foldLimits), "MSG-R-3", capID, "worker-z")
	require.Equal(t, domain.StatusDuplicateDelivery, again.Status, "a message refused before, known from the snapshot")

	_, err := h.HandlerWith(h.Store, func(c *ledger.Config) { foldLimits(c); c.SnapshotEvery = -1 }).
		Claim(ctx, h.Op, domain.Claim{MessageID: "MSG-NO-SNAPSHOT", CapabilityID: capID, WorkerID: "worker-z"})
	require.ErrorContains(t, err, "refusing to load it", "without a snapshot, one fold reads at most MaxStreamEvents events")

	require.NoError(t, flood.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: claimed.ExecutionID, LeaseEpoch: 1, LeaseSecret: claimed.LeaseSecret,
		Outcome: domain.NotApplied, Detail: "validation"}, ledger.Cause{Actor: "worker-a"}))
	h.Allow(OKFacts)
	second := h.Issue()
	r := h.Claim(h.HandlerWith(h.Store, foldLimits), "MSG-2", second, "worker-a")
	require.Equal(t, domain.StatusClaimed, r.Status, "the worker claims the operation whatever its evidence stream's length")
}

// evidenceConflictFoldsWhatFollows: two handlers append evidence to one
// stream; the one whose fold is behind meets a version conflict and folds
// only the events the other appended — one read from its fold's last
// event on — never the stream from its start.
func evidenceConflictFoldsWhatFollows(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	require.Equal(t, domain.StatusClaimed, h.Claim(h.H, "MSG-1", capID, "worker-a").Status)
	evidence := domain.EvidenceStreamOf(h.Op)
	bounded := func(c *ledger.Config) { c.EvidenceBound = floodBound }
	a := h.HandlerWith(h.Another(), bounded)
	reads := &streamReads{Store: h.Store, stream: evidence}
	conflicts := &conflictCounter{Store: reads, stream: evidence}
	behind := h.HandlerWith(conflicts, bounded)

	h.replays(a, capID, "MSG-A", 0, 100)
	h.replays(behind, capID, "MSG-B", 0, 1) // its fold ends at 100
	const appended = 40
	h.replays(a, capID, "MSG-A", 100, 100+appended)
	reads.take()

	h.replays(behind, capID, "MSG-B", 1, 2)
	require.EqualValues(t, 1, conflicts.conflicts.Load(), "the append was made on a fold behind the stream")
	caughtUp := reads.take()
	t.Logf("conflict on a %d-event evidence stream, %d events behind: %d reads, %d events: %v", 100+appended+1, appended, len(caughtUp), rowsRead(caughtUp), caughtUp)
	require.NotEmpty(t, caughtUp)
	for _, r := range caughtUp {
		require.GreaterOrEqual(t, r.from, int64(100), "read from the fold's last event on: %v", caughtUp)
	}
	require.Equal(t, 1+appended, rowsRead(caughtUp), "the fold's last event and the events after it: %v", caughtUp)
	require.EqualValues(t, 100+appended+1, h.evidenceVersion())

	dup := h.Claim(behind, "MSG-A-120", capID, "worker-z")
	require.Equal(t, domain.StatusDuplicateDelivery, dup.Status, "the caught-up fold names the other handler's refusals")
}

// staleEvidenceSnapshotIgnored: the evidence stream went back past its
// snapshot (a failover; the snapshot outlived the events) and was written
// again, so the snapshot's version holds another event. A handler with an empty cache ignores it and folds
// the stream as it is — a message whose refusal the stream lost is
// refused again, not answered a duplicate — and keeps a snapshot that
// matches the stream in its place.
func staleEvidenceSnapshotIgnored(t *testing.T, b Backend) {
	requireShorten(t, b)
	ctx := context.Background()
	h := NewHarness(t, b)
	requireSnapshots(t, h)
	h.Allow(OKFacts)
	capID := h.Issue()
	flood := h.HandlerWith(h.Store, foldLimits)
	require.Equal(t, domain.StatusClaimed, h.Claim(flood, "MSG-1", capID, "worker-a").Status)
	evidence := domain.EvidenceStreamOf(h.Op)
	h.replays(flood, capID, "MSG-A", 0, 120)
	snap, ok, err := h.Snapshots.LoadSnapshot(ctx, evidence)
	require.NoError(t, err)
	require.True(t, ok, "the flooding handler kept a snapshot")
	require.EqualValues(t, 2*foldSnapshotEvery-1, snap.Version)

	b.Shorten(t, h.Store, evidence, 79) // MSG-A-80 .. MSG-A-119 are gone
	// The snapshot outlives the events it was taken at (a backend's
	// Shorten may drop it with them: it is kept again).
	require.NoError(t, h.Snapshots.SaveSnapshot(ctx, snap))
	h.replays(h.HandlerWith(h.Store, foldLimits), capID, "MSG-B", 0, 40)
	require.EqualValues(t, 119, h.evidenceVersion())

	fresh := h.HandlerWith(h.Store, foldLimits)
	out := h.Claim(fresh, "MSG-A-90", capID, "worker-z")
	require.Equal(t, domain.StatusAlreadyConsumed, out.Status, "refused again: the stream no longer holds its refusal")
	require.Equal(t, domain.StatusDuplicateDelivery, h.Claim(fresh, "MSG-B-30", capID, "worker-z").Status)
	require.Equal(t, domain.StatusDuplicateDelivery, h.Claim(fresh, "MSG-A-10", capID, "worker-z").Status)

	snap, ok, err = h.Snapshots.LoadSnapshot(ctx, evidence)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 119, snap.Version, "a snapshot that matches the stream replaced the stale one")
	recs, err := h.Store.ReadStream(ctx, evidence, snap.Version, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, recs[0].Hash, snap.Hash)
}
