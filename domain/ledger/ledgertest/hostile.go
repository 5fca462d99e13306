package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// HostileRate is how many hostile presentations a second of the ledger's
// clock hostilePresentations makes against one operation.
const HostileRate = 50

// visibleBound bounds waiting for the global log to show committed
// events (see RunHostile).
const visibleBound = 30 * time.Second

// hostileSeconds is how many seconds of the ledger's clock the holder
// renews under them before it records its outcome.
const hostileSeconds = 20

// conflictCounter is a store that counts the version conflicts of appends
// to one stream.
type conflictCounter struct {
	eventstore.Store
	stream    string
	conflicts atomic.Int64
}

func (c *conflictCounter) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	r, err := c.Store.Append(ctx, stream, expected, events)
	if stream == c.stream && errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		c.conflicts.Add(1)
	}
	return r, err
}

// HostileReport is what hostilePresentations measured.
type HostileReport struct {
	Presentations  int           // hostile presentations made, every one refused
	HolderWrites   int           // renewals and the outcome, every one accepted
	HolderSlowest  time.Duration // the holder's slowest write, wall time
	EvidenceEvents int           // the evidence stream's events at the end
	Summaries      int           // of them, RefusalsSummarized
	Accounted      int64         // refusals audit verify accounts for
}

// hostilePresentations: while the lease holder renews once a second (of
// the ledger's clock) for hostileSeconds and then records its outcome, two
// other handler instances (stores of their own) present HostileRate times
// a second against the same operation — the spent capability again under
// new message ids (replays), the holder's message again (duplicate
// deliveries), renewals and outcomes without the lease's secret (refused
// writes). Every holder write succeeds within its lease, none of them
// meets a version conflict (the hostile evidence never moves the
// operation's stream), the operation's stream holds only the holder's
// state, and every refusal is accounted for by audit verify, one by one
// within the bound or counted in a summary.
func hostilePresentations(t *testing.T, b Backend) {
	rep := RunHostile(t, b)
	t.Logf("hostile: %d presentations at %d/s for %ds of the ledger's clock; holder: %d writes, slowest %s; evidence stream: %d events (%d summaries), audit accounts for %d refusals",
		rep.Presentations, HostileRate, hostileSeconds, rep.HolderWrites, rep.HolderSlowest, rep.EvidenceEvents, rep.Summaries, rep.Accounted)
}

// RunHostile runs hostilePresentations and returns what it measured.
func RunHostile(t *testing.T, b Backend) HostileReport {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	capID := h.Issue()
	counter := &conflictCounter{Store: h.Store, stream: h.Op.StreamName()}
	holder := h.Handler(counter)
	claim, err := holder.Claim(ctx, h.Op, domain.Claim{MessageID: "MSG-HOLDER", CapabilityID: capID, WorkerID: "worker-a", CorrelationID: "COR-2210"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClaimed, claim.Status)
	x := claim.ExecutionID
	hostile := []*ledger.Handler{h.Handler(h.Another()), h.Handler(h.Another())}

	var rep HostileReport
	var refusals atomic.Int64
	present := func(i int) error {
		hd := hostile[i%2]
		by := ledger.Cause{Actor: fmt.Sprintf("intruder-%d", i%3)}
		switch i % 4 {
		case 0, 1: // a replay of the spent capability
			out, err := hd.ClaimAs(ctx, h.Op, domain.Claim{MessageID: domain.MessageID(fmt.Sprintf("MSG-H-%d", i)), CapabilityID: capID, WorkerID: "worker-z"}, by)
			if err == nil && out.Status != domain.StatusAlreadyConsumed {
				err = fmt.Errorf("replay answered %s", out.Status)
			}
			return err
		case 2: // the holder's message delivered again
			out, err := hd.ClaimAs(ctx, h.Op, domain.Claim{MessageID: "MSG-HOLDER", CapabilityID: capID, WorkerID: "worker-z"}, by)
			if err == nil && out.Status != domain.StatusDuplicateDelivery {
				err = fmt.Errorf("duplicate answered %s", out.Status)
			}
			return err
		default: // a write without the lease's secret
			var err error
			if i%8 == 3 {
				_, err = hd.RenewLease(ctx, h.Op, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: "guessed", WorkerID: "worker-a"}, by)
			} else {
				err = hd.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, Outcome: domain.NotApplied}, by)
			}
			var r *domain.Refusal
			if !errors.As(err, &r) || r.Reason != domain.ReasonLeaseNotHeld {
				return fmt.Errorf("forged write answered %v", err)
			}
			return nil
		}
	}
	holderWrite := func(write func() error) {
		t.Helper()
		expiry := h.State().Execution(x).LeaseExpiresAt
		start := time.Now()
		require.NoError(t, write())
		rep.HolderWrites++
		rep.HolderSlowest = max(rep.HolderSlowest, time.Since(start))
		require.True(t, h.Clock.Now().Before(expiry), "the holder's write at %s is within its lease (to %s)", h.Clock.Now(), expiry)
	}
	// One second of the ledger's clock: HostileRate presentations racing
	// the holder's write.
	second := func(write func() error) {
		var wg sync.WaitGroup
		errs := make(chan error, HostileRate)
		for range HostileRate {
			i := rep.Presentations
			rep.Presentations++
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := present(i); err != nil {
					errs <- err
					return
				}
				refusals.Add(1)
			}()
		}
		holderWrite(write)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "every hostile presentation is refused and recorded")
		}
		h.Clock.Advance(time.Second)
	}
	for range hostileSeconds {
		second(func() error {
			_, err := holder.RenewLease(ctx, h.Op, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: claim.LeaseSecret, WorkerID: "worker-a"}, ledger.Cause{Actor: "worker-a"})
			return err
		})
	}
	second(func() error {
		return holder.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: claim.LeaseSecret,
			Outcome: domain.Completed, ProviderReference: "re_holder"}, ledger.Cause{Actor: "worker-a"})
	})
	require.Equal(t, domain.ExecCompleted, h.State().Execution(x).State)
	require.Zero(t, counter.conflicts.Load(), "no holder write met a version conflict")
	require.EqualValues(t, rep.Presentations, refusals.Load())

	// The operation's stream holds its state only: requested, decided,
	// issued, claimed, the renewals and the outcome.
	recs, err := h.Store.ReadStream(ctx, h.Op.StreamName(), 0, 100_000)
	require.NoError(t, err)
	require.Len(t, recs, 4+hostileSeconds+1)
	for _, r := range recs {
		require.False(t, domain.IsEvidenceType(r.Type), "%s@%d is evidence in the operation's stream", r.Type, r.Version)
	}
	// The evidence is bounded and accounted for.
	ev, err := h.Store.ReadStream(ctx, domain.EvidenceStreamOf(h.Op), 0, 100_000)
	require.NoError(t, err)
	rep.EvidenceEvents = len(ev)
	for _, r := range ev {
		if r.Type == domain.TypeRefusalsSummarized {
			rep.Summaries++
		}
	}
	require.Less(t, rep.EvidenceEvents, rep.Presentations/2, "past the bound, refusals are counted, not recorded one by one")
	for _, typ := range []string{domain.TypePresentationRejected, domain.TypeDeliveryDuplicated, domain.TypeWriteRefused} {
		require.Positive(t, h.CountEvents(typ), typ)
	}
	require.Equal(t, rep.Presentations, h.CountEvents(domain.TypePresentationRejected)+h.CountEvents(domain.TypeDeliveryDuplicated)+h.CountEvents(domain.TypeWriteRefused))
	// The global log audit verify reads may withhold the last events while
	// an older transaction anywhere on the server is open (PostgreSQL's
	// ReadAll, shared by parallel tests): read it again, bounded, until it
	// holds them.
	var report audit.Report
	for deadline := time.Now().Add(visibleBound); ; {
		report, err = audit.Verify(ctx, h.Store, audit.VerifyOptions{})
		require.NoError(t, err)
		if report.Refusals.Total >= int64(rep.Presentations) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for a condition
	}
	require.Empty(t, report.Violations)
	rep.Accounted = report.Refusals.Total
	require.EqualValues(t, rep.Presentations, rep.Accounted, "audit verify accounts for every refusal")
	return rep
}
