package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// The events of a well-behaved export download: three uses of one
// capability, OP-1, export EXP-7781.

func exportRequested(op domain.OperationID) domain.OperationRequested {
	return domain.OperationRequested{OperationID: op, Kind: domain.KindExportDownload, ExportID: "EXP-7781",
		CorrelationID: "COR-5120", RequestedBy: "agent-7", RequestedAt: t0}
}

func allowDownloads(op domain.OperationID, dec domain.DecisionID, attempt, uses int) domain.Decided {
	p, _ := domain.PolicyOf(domain.KindExportDownload)
	return domain.Decided{DecisionID: dec, Kind: domain.KindExportDownload, Verdict: domain.Allowed,
		ExportFacts: &domain.ExportFacts{ExportReady: true}, Approver: "agent-7", PolicyVersion: domain.ExportPolicyVersion,
		Attempt: attempt, Uses: uses, KeyPolicy: domain.KeyPerAttempt, IdempotencyKey: p.AttemptKey(op, attempt), DecidedAt: t0}
}

func issueUses(c domain.CapabilityID, dec domain.DecisionID, attempt, uses int) domain.CapabilityIssued {
	return domain.CapabilityIssued{CapabilityID: c, DecisionID: dec, Kind: domain.KindExportDownload, Attempt: attempt, Uses: uses,
		IssuedAt: t0, ExpiresAt: t0.Add(domain.DefaultCapabilityTTL)}
}

func claimUse(op domain.OperationID, x domain.ExecutionID, c domain.CapabilityID, msg domain.MessageID, attempt, use int, at time.Time) domain.Claimed {
	p, _ := domain.PolicyOf(domain.KindExportDownload)
	return domain.Claimed{ExecutionID: x, CapabilityID: c, Kind: domain.KindExportDownload, MessageID: msg, WorkerID: "worker-a",
		Attempt: attempt, Use: use, LeaseEpoch: 1, LeaseExpiresAt: at.Add(domain.DefaultLeaseDuration),
		IdempotencyKey: p.UseKey(p.AttemptKey(op, attempt), use), ClaimedAt: at}
}

// startExport writes the request, a decision for three downloads and CAP-1.
func (h *history) startExport() {
	h.add(exportRequested(h.op), allowDownloads(h.op, "DEC-1", 1, 3), issueUses("CAP-1", "DEC-1", 1, 3))
}

// use claims use n of CAP-1 as EXE-n on MSG-n and records its outcome.
func (h *history) use(n int, o domain.Outcome) {
	x := domain.ExecutionID(fmt.Sprintf("EXE-%d", n))
	m := domain.MessageID(fmt.Sprintf("MSG-%d", n))
	h.by("worker-a", string(m), claimUse(h.op, x, "CAP-1", m, 1, n, at(time.Duration(n)*time.Second)))
	h.by("worker-a", string(x), outcome(x, 1, o, "dl_"+string(x), at(time.Duration(n)*time.Second+500*time.Millisecond)))
}

// TestVerifyAcceptsBoundedUse: three uses, one NotApplied, the fourth
// presentation refused as a replay, a new decision afterwards: clean.
func TestVerifyAcceptsBoundedUse(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		h := newHistory(t, store, "OP-1")
		h.startExport()
		h.use(1, domain.Completed)
		h.use(2, domain.NotApplied)
		h.use(3, domain.Completed)
		h.by("worker-c", "MSG-4", domain.PresentationRejected{Status: domain.StatusAlreadyConsumed, Reason: domain.ReasonCapabilityAlreadyConsumed,
			MessageID: "MSG-4", CapabilityID: "CAP-1", OperationID: h.op, ExecutionID: "EXE-3", ReplaySuspected: true, RejectedAt: at(time.Minute)})
		h.add(allowDownloads(h.op, "DEC-2", 2, 1), issueUses("CAP-2", "DEC-2", 2, 1))
		h.by("worker-a", "MSG-5", claimUse(h.op, "EXE-4", "CAP-2", "MSG-5", 2, 1, at(2*time.Minute)))
		rep := verify(t, store, h.next, audit.VerifyOptions{})
		require.True(t, rep.OK(), "%+v", rep.Violations)
		require.Equal(t, audit.ExecutionCounts{Executing: 1, Completed: 2, NotApplied: 1}, rep.Executions)
	})
}

var boundedViolations = []violation{
	{"I10/use-beyond-its-uses", func(h *history) {
		h.startExport()
		h.use(1, domain.Completed)
		h.use(2, domain.Completed)
		h.use(3, domain.Completed)
		c := claimUse(h.op, "EXE-4", "CAP-1", "MSG-4", 1, 4, at(time.Minute))
		h.by("worker-a", "MSG-4", c)
	}, []string{"I10"}, domain.TypeClaimed},
	{"I10/use-out-of-order", func(h *history) {
		h.startExport()
		h.by("worker-a", "MSG-1", claimUse(h.op, "EXE-1", "CAP-1", "MSG-1", 1, 2, at(time.Second)))
	}, []string{"I10"}, domain.TypeClaimed},
	{"I10/second-use-while-one-is-open", func(h *history) {
		h.startExport()
		h.by("worker-a", "MSG-1", claimUse(h.op, "EXE-1", "CAP-1", "MSG-1", 1, 1, at(time.Second)))
		h.by("worker-a", "EXE-1", domain.OutcomeUnknown{ExecutionID: "EXE-1", LeaseEpoch: 1, Cause: "timeout", RecordedAt: at(2 * time.Second)})
		h.by("worker-b", "MSG-2", claimUse(h.op, "EXE-2", "CAP-1", "MSG-2", 1, 2, at(3*time.Second)))
	}, []string{"I10"}, domain.TypeClaimed},
	{"I10/use-under-an-earlier-uses-key", func(h *history) {
		h.startExport()
		h.use(1, domain.Completed)
		c := claimUse(h.op, "EXE-2", "CAP-1", "MSG-2", 1, 2, at(time.Minute))
		c.IdempotencyKey = "export-OP-1-a1-u1"
		h.by("worker-a", "MSG-2", c)
	}, []string{"I10", "I6"}, domain.TypeClaimed},
	{"I10/capability-of-more-uses-than-decided", func(h *history) {
		h.add(exportRequested(h.op), allowDownloads(h.op, "DEC-1", 1, 3), issueUses("CAP-1", "DEC-1", 1, 5))
	}, []string{"I10"}, domain.TypeCapabilityIssued},
	{"I10/second-capability-under-one-decision", func(h *history) {
		h.startExport()
		h.add(issueUses("CAP-2", "DEC-1", 1, 3))
	}, []string{"I10"}, domain.TypeCapabilityIssued},
	{"I10/uses-beyond-the-kind", func(h *history) {
		h.add(exportRequested(h.op), allowDownloads(h.op, "DEC-1", 1, domain.MaxExportDownloads+1))
	}, []string{"I10"}, domain.TypeDecided},
	{"I10/refund-capability-of-two-uses", func(h *history) {
		h.add(requested(h.op), allow(h.op, "DEC-1", 1))
		c := issue("CAP-1", "DEC-1", 1, t0)
		c.Uses = 2
		h.add(c)
	}, []string{"I10"}, domain.TypeCapabilityIssued},
	{"I10/claim-of-another-kind", func(h *history) {
		h.start()
		c := claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, at(3*time.Second))
		c.Kind = domain.KindExportDownload
		h.by("worker-a", "MSG-1", c)
	}, []string{"I10"}, domain.TypeClaimed},
	{"I9/export-decided-while-a-use-is-open", func(h *history) {
		h.startExport()
		h.by("worker-a", "MSG-1", claimUse(h.op, "EXE-1", "CAP-1", "MSG-1", 1, 1, at(time.Second)))
		h.add(allowDownloads(h.op, "DEC-2", 2, 1))
	}, []string{"I9"}, domain.TypeDecided},
	{"I9/export-allowed-although-not-ready", func(h *history) {
		h.add(exportRequested(h.op))
		d := allowDownloads(h.op, "DEC-1", 1, 3)
		d.ExportFacts.ExportReady = false
		h.add(d)
	}, []string{"I9"}, domain.TypeDecided},
	{"I7/last-use-replay-not-suspected", func(h *history) {
		h.startExport()
		h.use(1, domain.Completed)
		h.use(2, domain.Completed)
		h.use(3, domain.Completed)
		h.by("worker-c", "MSG-4", domain.PresentationRejected{Status: domain.StatusAlreadyConsumed, Reason: domain.ReasonCapabilityAlreadyConsumed,
			MessageID: "MSG-4", CapabilityID: "CAP-1", OperationID: h.op, RejectedAt: at(time.Minute)})
	}, []string{"I7"}, domain.TypePresentationRejected},
}

// TestVerifyCatchesEachBoundedUseViolation: as TestVerifyCatchesEachViolation,
// for the checks of authority of bounded use.
func TestVerifyCatchesEachBoundedUseViolation(t *testing.T) {
	onEveryBackendShared(t, func(t *testing.T, open func(t *testing.T) eventstore.Store) {
		for _, c := range boundedViolations {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				store := open(t)
				h := newHistory(t, store, "OP-1")
				c.write(h)
				rep := verify(t, store, h.next, audit.VerifyOptions{})
				require.Equal(t, c.want, invariantIDs(rep), "%+v", rep.Violations)
				for _, v := range rep.Violations {
					require.Equal(t, c.event, v.Event, v.Message)
					require.Equal(t, h.next-1, v.Version, "reported on the last event written: %s", v.Message)
				}
			})
		}
	})
}

// TestTheTimelineTellsAnExportDownloadsUses: audit replay of an export
// download says what it is about, how many uses its authority has, and
// which use each claim consumed, with each use's key.
func TestTheTimelineTellsAnExportDownloadsUses(t *testing.T) {
	store := newMemoryStore()
	h := newHistory(t, store, "OP-1")
	h.startExport()
	h.use(1, domain.Completed)
	h.use(2, domain.Completed)
	rows, err := audit.Replay(t.Context(), store, "OP-1")
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, audit.WriteTimelineText(&b, "OP-1", rows))
	text := b.String()
	for _, want := range []string{
		"export-download of export EXP-7781",
		"decision DEC-1 for attempt 1, 3 uses",
		"3 uses, attempt 1 under DEC-1",
		"use 1 of the capability consumed for attempt 1",
		"provider key export-OP-1-a1-u2",
	} {
		require.Contains(t, text, want)
	}
}
