package audit_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// violation is a history written straight into the store that breaks one
// invariant (sometimes, by its nature, a second), and what Verify must say.
type violation struct {
	name  string
	write func(h *history)
	want  []string // the invariant ids reported, sorted
	event string   // the type of the one event they are all reported on
}

var at = func(d time.Duration) time.Time { return t0.Add(d) }

var violations = []violation{
	// I1: a capability is consumed at most once, never revoked, expired or unknown.
	{"I1/consumed-twice", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.NotApplied, "", at(5*time.Second)))
		h.by("worker-b", "MSG-2", claim(h.op, "EXE-2", "CAP-1", "MSG-2", "worker-b", 1, at(6*time.Second)))
	}, []string{"I1", "I2"}, domain.TypeClaimed},
	{"I1/claimed-after-revocation", func(h *history) {
		h.start()
		h.add(domain.CapabilityRevoked{CapabilityID: "CAP-1", Reason: "agent withdrew", RevokedAt: at(time.Second)})
		h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(3*time.Second)))
	}, []string{"I1"}, domain.TypeClaimed},
	{"I1/claimed-after-expiry", func(h *history) {
		h.start()
		h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(domain.DefaultCapabilityTTL)))
	}, []string{"I1"}, domain.TypeClaimed},
	{"I1/capability-never-issued", func(h *history) {
		h.start()
		h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-FORGED", "MSG-1", "worker-a", 1, at(3*time.Second)))
	}, []string{"I1"}, domain.TypeClaimed},

	// I2: spent authority is never reset; a new attempt needs a new decision and capability.
	{"I2/spent-capability-reissued", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.NotApplied, "", at(5*time.Second)))
		h.add(allow(h.op, "DEC-2", 2), issue("CAP-1", "DEC-2", 2, at(time.Minute)))
	}, []string{"I2"}, domain.TypeCapabilityIssued},
	{"I2/old-attempt-capability-starts-new-execution", func(h *history) {
		h.start()
		h.add(issue("CAP-1B", "DEC-1", 1, t0))
		h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(3*time.Second)))
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.NotApplied, "", at(5*time.Second)))
		h.by("worker-b", "MSG-2", claim(h.op, "EXE-2", "CAP-1B", "MSG-2", "worker-b", 1, at(6*time.Second)))
	}, []string{"I2"}, domain.TypeClaimed},
	{"I2/decision-skips-an-attempt", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.NotApplied, "", at(5*time.Second)))
		h.add(allow(h.op, "DEC-3", 3))
	}, []string{"I2"}, domain.TypeDecided},

	// I3: no execution opens while another blocks.
	{"I3/second-execution-while-unknown", func(h *history) {
		h.start()
		h.add(issue("CAP-2", "DEC-1", 1, t0))
		h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(3*time.Second)))
		h.by("worker-a", "EXE-1", domain.OutcomeUnknown{ExecutionID: "EXE-1", LeaseEpoch: 1, Cause: "timeout", RecordedAt: at(33 * time.Second)})
		h.by("worker-b", "MSG-2", claim(h.op, "EXE-2", "CAP-2", "MSG-2", "worker-b", 1, at(40*time.Second)))
	}, []string{"I2", "I3"}, domain.TypeClaimed},

	// I4: Unknown never inferred; a duplicate delivery changes nothing.
	{"I4/duplicate-delivery-marks-unknown", func(h *history) {
		h.claimed()
		h.by("worker-b", "MSG-1", domain.DeliveryDuplicated{MessageID: "MSG-1", CapabilityID: "CAP-1", WorkerID: "worker-b",
			ExecutionID: "EXE-1", ExecutionState: domain.ExecExecuting, SeenAt: at(34 * time.Second)})
		h.by("worker-b", "MSG-1", lapse("EXE-1", 1, at(63*time.Second), at(34*time.Second)))
	}, []string{"I4"}, domain.TypeLeaseLapsed},
	{"I4/escalated-while-executing", func(h *history) {
		h.claimed()
		h.by("reconciler", "EXE-1", domain.Escalated{ExecutionID: "EXE-1", Reason: "impatient", EscalatedAt: at(10 * time.Second)})
	}, []string{"I4"}, domain.TypeEscalated},
	{"I4/unknown-through-outcome-recorded", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Unknown, "", at(33*time.Second)))
	}, []string{"I4"}, domain.TypeOutcomeRecorded},

	// I5: writes fenced by the lease epoch.
	{"I5/outcome-under-an-epoch-not-held", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 2, domain.Completed, "re_1", at(10*time.Second)))
	}, []string{"I5"}, domain.TypeOutcomeRecorded},
	{"I5/stale-executor-closes-unknown", func(h *history) {
		h.claimed()
		h.by("sweeper", "sweep", lapse("EXE-1", 1, at(63*time.Second), at(64*time.Second)))
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Completed, "re_1", at(70*time.Second)))
	}, []string{"I5", "I8"}, domain.TypeOutcomeRecorded},
	{"I5/renewal-after-lapse", func(h *history) {
		h.claimed()
		h.by("sweeper", "sweep", lapse("EXE-1", 1, at(63*time.Second), at(64*time.Second)))
		h.by("worker-a", "EXE-1", domain.LeaseRenewed{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseExpiresAt: at(2 * time.Minute), RenewedAt: at(65 * time.Second)})
	}, []string{"I5"}, domain.TypeLeaseRenewed},
	{"I5/late-outcome-on-executing", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", domain.LateOutcomeRecorded{ExecutionID: "EXE-1", StaleEpoch: 1, Outcome: domain.Completed, RecordedAt: at(10 * time.Second)})
	}, []string{"I5"}, domain.TypeLateOutcomeRecorded},

	// I6: the provider key derives from operation and attempt.
	{"I6/claim-with-a-fresh-key", func(h *history) {
		h.start()
		c := claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(3*time.Second))
		c.IdempotencyKey = "0b6d8a4e-fresh-per-call"
		h.by("worker-a", "MSG-1", c)
	}, []string{"I6"}, domain.TypeClaimed},
	{"I6/decision-key-not-derived", func(h *history) {
		h.add(requested(h.op))
		d := allow(h.op, "DEC-1", 1)
		d.IdempotencyKey = "refund-COR-2210" // the correlation id doubling as the key
		h.add(d)
	}, []string{"I6"}, domain.TypeDecided},

	// I7: every refusal recorded, with replay suspected for spent authority.
	{"I7/refusal-missing-fields-and-attempted", func(h *history) {
		h.claimed()
		h.by("worker-b", "MSG-2", domain.PresentationRejected{Status: domain.StatusOperationNotExecutable, Reason: domain.ReasonOperationExecuting,
			MessageID: "MSG-2", OperationID: h.op, ExecutionAttempted: true, RejectedAt: at(5 * time.Second)})
	}, []string{"I7"}, domain.TypePresentationRejected},
	{"I7/replay-not-suspected", func(h *history) {
		h.claimed()
		h.by("worker-c", "MSG-77C", domain.PresentationRejected{Status: domain.StatusAlreadyConsumed, Reason: domain.ReasonCapabilityAlreadyConsumed,
			MessageID: "MSG-77C", CapabilityID: "CAP-1", OperationID: h.op, RejectedAt: at(25 * time.Hour)})
	}, []string{"I7"}, domain.TypePresentationRejected},
	{"I7/new-message-dismissed-as-duplicate", func(h *history) {
		h.claimed()
		h.by("worker-c", "MSG-77C", domain.DeliveryDuplicated{MessageID: "MSG-77C", CapabilityID: "CAP-1", WorkerID: "worker-c", SeenAt: at(25 * time.Hour)})
	}, []string{"I7"}, domain.TypeDeliveryDuplicated},

	// I8: an Unknown stays open, is reconciled or escalated; an escalation closes only by evidence.
	{"I8/escalation-silently-closed", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", domain.OutcomeUnknown{ExecutionID: "EXE-1", LeaseEpoch: 1, Cause: "timeout", RecordedAt: at(33 * time.Second)})
		h.by("reconciler", "EXE-1", domain.Escalated{ExecutionID: "EXE-1", Reason: "reconciliation.cannot-tell", EscalatedAt: at(5 * time.Minute)})
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Completed, "re_1", at(6*time.Minute)))
	}, []string{"I5", "I8"}, domain.TypeOutcomeRecorded},
	{"I8/completed-execution-reconciled-away", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Completed, "re_1", at(10*time.Second)))
		h.by("ops-1", "EXE-1", domain.Reconciled{ExecutionID: "EXE-1", Outcome: domain.NotApplied, Method: domain.MethodOperator, Actor: "ops-1", ReconciledAt: at(time.Hour)})
	}, []string{"I8"}, domain.TypeReconciled},

	// I9: a new attempt is decided again, on facts the policy allows, before its authority.
	{"I9/capability-issued-after-not-applied-without-decision", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.NotApplied, "", at(5*time.Second)))
		h.add(issue("CAP-2", "DEC-1", 1, at(time.Minute)))
	}, []string{"I9"}, domain.TypeCapabilityIssued},
	{"I9/decided-while-executing", func(h *history) {
		h.claimed()
		h.add(allow(h.op, "DEC-2", 2))
	}, []string{"I9"}, domain.TypeDecided},
	{"I9/allowed-against-recorded-facts", func(h *history) {
		h.add(requested(h.op))
		d := allow(h.op, "DEC-1", 1)
		d.Facts.ChargebackOpen = true
		h.add(d)
	}, []string{"I9"}, domain.TypeDecided},
	{"I9/claim-under-superseded-decision", func(h *history) {
		h.start()
		d := allow(h.op, "DEC-2", 1)
		d.Verdict, d.Reasons, d.Facts.ChargebackOpen = domain.Denied, []string{string(domain.ReasonPolicyChargebackOpen)}, true
		h.add(d)
		h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(3*time.Second)))
	}, []string{"I9"}, domain.TypeClaimed},

	// Structure.
	{"S2/undecodable-event", func(h *history) {
		h.claimed()
		h.raw(domain.TypeOutcomeRecorded, `{"execution_id":"EXE-1","lease_epoch":"one","outcome":"Completed"}`)
	}, []string{"S2"}, domain.TypeOutcomeRecorded},
	{"S2/event-of-a-newer-version", func(h *history) {
		h.claimed()
		h.rawAt(domain.TypeOutcomeRecorded, 2, `{"execution_id":"EXE-1","lease_epoch":1,"outcome":"Completed"}`)
	}, []string{"S2"}, domain.TypeOutcomeRecorded},
	{"S2/unknown-event-type", func(h *history) {
		h.claimed()
		h.raw("RefundForced", `{"execution_id":"EXE-1"}`)
	}, []string{"S2"}, "RefundForced"},
	{"S3/events-before-operation-requested", func(h *history) {
		h.add(allow(h.op, "DEC-1", 1))
	}, []string{"S3"}, domain.TypeDecided},
	{"S3/operation-requested-twice", func(h *history) {
		h.start()
		h.add(requested(h.op))
	}, []string{"S3"}, domain.TypeOperationRequested},
	{"S4/unknown-execution", func(h *history) {
		h.claimed()
		h.by("worker-a", "EXE-9", domain.LeaseRenewed{ExecutionID: "EXE-9", LeaseEpoch: 1, LeaseExpiresAt: at(2 * time.Minute), RenewedAt: at(time.Minute)})
	}, []string{"S4"}, domain.TypeLeaseRenewed},
}

// TestVerifyCatchesEachViolation writes each violating history straight
// into the store and proves Verify reports it, on the right event, and
// nothing else.
func TestVerifyCatchesEachViolation(t *testing.T) {
	onEveryBackendShared(t, func(t *testing.T, open func(t *testing.T) eventstore.Store) {
		for _, c := range violations {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				store := open(t)
				h := newHistory(t, store, "OP-1")
				c.write(h)
				rep := verify(t, store, h.next, audit.VerifyOptions{})
				require.False(t, rep.OK())
				require.Equal(t, c.want, invariantIDs(rep), "%+v", rep.Violations)
				var text bytes.Buffer
				require.NoError(t, rep.WriteText(&text))
				require.Contains(t, text.String(), "audit verify: FAILED")
				require.Contains(t, text.String(), c.want[0]+" ")
				for _, v := range rep.Violations {
					require.Equal(t, c.event, v.Event, v.Message)
					require.Equal(t, domain.OperationID("OP-1"), v.Operation)
					require.Equal(t, h.next-1, v.Version, "reported on the last event written")
					require.NotEmpty(t, v.Position)
					require.NotEmpty(t, v.Message)
				}
			})
		}
	})
}

// TestVerifyCatchesAGap hides one event from the log a reader sees.
func TestVerifyCatchesAGap(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		h := newHistory(t, store, "OP-1")
		h.claimed()
		h.by("worker-a", "EXE-1", domain.LeaseRenewed{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseExpiresAt: at(90 * time.Second), RenewedAt: at(30 * time.Second)})
		h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Completed, "re_1", at(40*time.Second)))
		lossy := hidingStore{Store: store, hide: func(e eventstore.RecordedEvent) bool { return e.Type == domain.TypeLeaseRenewed }}
		waitVisible(t, store, h.next)
		rep := verify(t, lossy, h.next-1, audit.VerifyOptions{})
		require.Equal(t, []string{"H1", "S1"}, invariantIDs(rep), "the gap, and the chain link it breaks")
		require.Equal(t, "S1", rep.Violations[0].Invariant)
		require.Equal(t, int64(5), rep.Violations[0].Version)
		require.Contains(t, rep.Violations[0].Message, "versions 4..4 are missing")
		require.Equal(t, "H1", rep.Violations[1].Invariant)
		require.Equal(t, int64(5), rep.Violations[1].Version)
	})
}

// TestVerifyChecksTheEvidenceStream: an unattributed refusal is a refusal too.
func TestVerifyChecksTheEvidenceStream(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		h := &history{t: t, store: store, stream: domain.EvidenceStream}
		h.by("worker-x", "MSG-X", domain.PresentationRejected{Status: domain.StatusInvalid, Reason: domain.ReasonOperationUnknown,
			MessageID: "MSG-X", OperationID: "OP-NOPE", ExecutionAttempted: true, RejectedAt: t0})
		rep := verify(t, store, 1, audit.VerifyOptions{})
		require.Equal(t, []string{"I7"}, invariantIDs(rep))
		require.Len(t, rep.Violations, 2, "no capability, and execution attempted")
		require.Equal(t, int64(1), rep.EvidenceEvents)
	})
}

// TestVerifyAcceptsMalformedDeliveryWithoutCapability: the evidence of a
// delivery from which no capability could be read (not JSON, no
// capability_id) carries the message and its reason, and no capability —
// as the dispatcher must record it. The simulator found I7 demanding one.
func TestVerifyAcceptsMalformedDeliveryWithoutCapability(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		h := &history{t: t, store: store, stream: domain.EvidenceStream}
		h.by("worker-x", "MSG-X", domain.PresentationRejected{Status: domain.StatusInvalid, Reason: domain.ReasonDeliveryMalformed,
			MessageID: "MSG-X", Detail: "not JSON", RejectedAt: t0})
		rep := verify(t, store, 1, audit.VerifyOptions{})
		require.Empty(t, invariantIDs(rep))
	})
}

// hidingStore is a store whose global log loses the events hide picks: a
// reader that skipped them.
type hidingStore struct {
	eventstore.Store
	hide func(eventstore.RecordedEvent) bool
}

func (s hidingStore) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	events, err := s.Store.ReadAll(ctx, after, limit)
	out := events[:0:0]
	for _, e := range events {
		if !s.hide(e) {
			out = append(out, e)
		}
	}
	return out, err
}

// TestVerifyAcceptsARefusalDecidedBeforeTheClaim: a refusal decided before
// the claim that spent its capability (on the state before it: a worker
// that froze between its decision and its append) and appended after the
// claim is not a replay left unsuspected, nor one decided at the claim's
// very time (the clock cannot order them); one decided after it is (the
// simulator found the first two after lossy failovers).
func TestVerifyAcceptsARefusalDecidedBeforeTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rejectedAt time.Time
		want       []string
	}{
		{"decided before the claim", at(2 * time.Second), nil},
		{"decided at the claim's time (not ordered by the clock)", at(3 * time.Second), nil},
		{"decided after the claim", at(4 * time.Second), []string{"I7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
				h := newHistory(t, store, "OP-1")
				h.claimed() // CAP-1 spent by MSG-1 at 3 s
				h.by("worker-c", "MSG-77C", domain.PresentationRejected{Status: domain.StatusInvalid, Reason: domain.ReasonCapabilityInvalid,
					MessageID: "MSG-77C", CapabilityID: "CAP-1", OperationID: h.op, RejectedAt: tc.rejectedAt})
				rep := verify(t, store, h.next, audit.VerifyOptions{})
				require.Equal(t, tc.want, invariantIDs(rep), "%+v", rep.Violations)
			})
		})
	}
}
