package domain

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var forkAt = time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)

// forkBase is a refund state with a bit of everything: a first attempt
// claimed, a second decided with two capabilities issued, a message set.
func forkBase(t *testing.T) *Operation {
	o := NewOperation()
	for _, e := range []Event{
		OperationRequested{OperationID: "OP-1", Kind: KindRefund, OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR", OrderTotalMinor: 1000, RequestedAt: forkAt},
		Decided{DecisionID: "DEC-1", Kind: KindRefund, Verdict: Allowed, Attempt: 1, DecidedAt: forkAt},
		CapabilityIssued{CapabilityID: "CAP-1", Kind: KindRefund, DecisionID: "DEC-1", Attempt: 1, IssuedAt: forkAt, ExpiresAt: forkAt.Add(time.Hour)},
		Claimed{ExecutionID: "EXE-1", Kind: KindRefund, CapabilityID: "CAP-1", MessageID: "MSG-1", Attempt: 1, LeaseEpoch: 1,
			LeaseSecretDigest: "00", LeaseExpiresAt: forkAt.Add(time.Minute), ClaimedAt: forkAt},
		Decided{DecisionID: "DEC-2", Kind: KindRefund, Verdict: Allowed, Attempt: 2, DecidedAt: forkAt},
		CapabilityIssued{CapabilityID: "CAP-2", Kind: KindRefund, DecisionID: "DEC-2", Attempt: 2, IssuedAt: forkAt, ExpiresAt: forkAt.Add(time.Hour)},
		CapabilityIssued{CapabilityID: "CAP-3", Kind: KindRefund, DecisionID: "DEC-2", Attempt: 2, IssuedAt: forkAt, ExpiresAt: forkAt.Add(time.Hour)},
	} {
		require.NoError(t, o.Evolve(e))
		o.Version++
	}
	return o
}

// forkEvents each change the base state (forkBase) in another way: every
// case of Evolve that changes an operation.
func forkEvents() []Event {
	later := forkAt.Add(time.Second)
	return []Event{
		Decided{DecisionID: "DEC-3", Kind: KindRefund, Verdict: Denied, Attempt: 2, DecidedAt: later},
		CapabilityIssued{CapabilityID: "CAP-4", Kind: KindRefund, DecisionID: "DEC-2", Attempt: 2, IssuedAt: later, ExpiresAt: later.Add(time.Hour)},
		CapabilityRevoked{CapabilityID: "CAP-3", RevokedAt: later},
		Claimed{ExecutionID: "EXE-2", Kind: KindRefund, CapabilityID: "CAP-2", MessageID: "MSG-2", Attempt: 2, LeaseEpoch: 1,
			LeaseSecretDigest: "11", LeaseExpiresAt: later.Add(time.Minute), ClaimedAt: later},
		PresentationRejected{MessageID: "MSG-3", CapabilityID: "CAP-1", OperationID: "OP-1"},
		LeaseRenewed{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseExpiresAt: later.Add(time.Hour), RenewedAt: later},
		OutcomeRecorded{ExecutionID: "EXE-1", LeaseEpoch: 1, Outcome: Completed, ProviderReference: "re_1", RecordedAt: later},
		OutcomeUnknown{ExecutionID: "EXE-1", LeaseEpoch: 1, Cause: "timeout", RecordedAt: later},
		LeaseLapsed{ExecutionID: "EXE-1", FromEpoch: 1, ToEpoch: 2, LapsedAt: later},
		LateOutcomeRecorded{ExecutionID: "EXE-1", StaleEpoch: 1, Outcome: NotApplied, RecordedAt: later},
		Reconciled{ExecutionID: "EXE-1", Outcome: Completed, ProviderReference: "re_1", ReconciledAt: later},
		Escalated{ExecutionID: "EXE-1", Reason: "r", EscalatedAt: later},
		LostEffectEscalated{OperationID: "OP-1", ExecutionID: "EXE-L", Attempt: 2, IdempotencyKey: "refund-OP-1-a2", FoundAt: later},
	}
}

// owned is o as a state that owns what it holds, to compare states by
// what they hold.
func owned(o *Operation) *Operation {
	c := o.Clone()
	c.shares = 0
	return c
}

// TestForkLeavesTheForkedStateAsItWas: an event folded into a fork changes
// the fork as it would change a copy of the state, and leaves the state
// forked, to the last field of the last record, as it was.
func TestForkLeavesTheForkedStateAsItWas(t *testing.T) {
	for _, e := range forkEvents() {
		t.Run(e.EventType(), func(t *testing.T) {
			base := forkBase(t)
			want := base.Clone()
			copied := base.Clone()
			require.NoError(t, copied.Evolve(e))
			require.NotEqual(t, owned(base), owned(copied), "the event changes the state")

			fork := base.Fork()
			require.NoError(t, fork.Evolve(e))
			require.Equal(t, want, base, "the forked state changed")
			require.Equal(t, owned(copied), owned(fork))

			again := fork.Fork() // a fork of a fork: the first one forked is frozen now
			for _, next := range forkEvents() {
				_ = again.Evolve(next) // some cannot follow: what matters is what they leave
			}
			require.Equal(t, want, base, "a fork of the fork changed the state")
			require.Equal(t, owned(copied), owned(fork), "a fork of the fork changed the fork")
		})
	}
}

// TestForkedStateReadWhileForksEvolve: forks of one state evolved at once,
// each by its own goroutine, while another reads the state to the last
// field. Under -race a write to anything the state holds is reported; and
// each fork ends as a fold of the same events from scratch.
func TestForkedStateReadWhileForksEvolve(t *testing.T) {
	base := forkBase(t)
	want := base.Clone()
	events := forkEvents()
	fromScratch := forkBase(t)
	for _, e := range events {
		_ = fromScratch.Evolve(e)
	}

	const forks = 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	read := make(chan int)
	go func() {
		n := 0
		defer func() { read <- n }()
		for {
			_ = base.Clone()
			n++
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	got := make([]*Operation, forks)
	for i := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := base
			for _, e := range events {
				o = o.Fork() // each state folded into is frozen after, as the handler's cache holds them
				_ = o.Evolve(e)
			}
			got[i] = o
		}()
	}
	wg.Wait()
	close(stop)
	require.Positive(t, <-read)
	require.Equal(t, want, base)
	for _, o := range got {
		require.Equal(t, owned(fromScratch), owned(o))
	}
}

// TestForkCopiesWhatAnEventChanges: a fork shares what its events leave as
// it was; what they change it holds a copy of.
func TestForkCopiesWhatAnEventChanges(t *testing.T) {
	base := forkBase(t)
	fork := base.Fork()
	require.NoError(t, fork.Evolve(LeaseRenewed{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseExpiresAt: forkAt.Add(time.Hour), RenewedAt: forkAt}))
	require.NotSame(t, base.Executions[0], fork.Executions[0], "the execution renewed is a copy")
	require.Same(t, base.Capabilities["CAP-1"], fork.Capabilities["CAP-1"], "the capabilities are shared")
	require.Same(t, &base.Decisions[0], &fork.Decisions[0], "the decisions are shared")
}
