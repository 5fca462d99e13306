package codectest

import (
	"time"

	"opledger/domain"
)

// t0 is Thursday 14:02:10 UTC, the seed story's approval; the samples'
// times carry nanoseconds so that a codec losing precision is caught.
var t0 = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d + 123_456_789*time.Nanosecond) }

// Samples returns one event of every type, in the current shape, with every
// field set to a value other than its zero value: a field a writer renames
// or drops, or a reader no longer fills, shows as a difference. The golden
// fixtures testdata/events/<Type>/v<N>.json are written from them (TestGolden
// -update writes a fixture that does not exist yet; it never rewrites one).
// A new event type needs a sample here.
//
// The four types that state an operation's kind and its use counts are
// sampled at their current version (2), as an export download's with every
// member set (a combination no decision writes, for the codec's sake); the
// previous releases' readers meet them as RefundSamples.
func Samples() []domain.Event {
	return append([]domain.Event{
		domain.OperationRequested{OperationID: "OP-5120", Kind: domain.KindExportDownload, OrderID: "ORD-8841", AmountMinor: 12000,
			Currency: "EUR", OrderTotalMinor: 20000, ExportID: "EXP-7781", CorrelationID: "COR-5120", RequestedBy: "agent-7",
			RequestedAt: at(0), RequestKey: "idem-5120-1", RequestHash: "0a1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcdef"},
		domain.Decided{DecisionID: "DEC-5120.1", Kind: domain.KindExportDownload, Verdict: domain.Denied,
			Reasons:     []string{string(domain.ReasonPolicyExportNotReady)},
			Facts:       domain.Facts{OrderRefundable: true, ChargebackOpen: true, RefundedMinor: 3000, OrderTotalMinor: 20000},
			ExportFacts: &domain.ExportFacts{ExportReady: true},
			Approver:    "agent-7", ApprovalLimit: 50000, PolicyVersion: domain.ExportPolicyVersion, Attempt: 2, Uses: 3,
			KeyPolicy: domain.KeyPerAttempt, IdempotencyKey: "export-OP-5120-a2", DecidedAt: at(time.Second)},
		domain.CapabilityIssued{CapabilityID: "CAP-5120.1", DecisionID: "DEC-5120.1", Kind: domain.KindExportDownload, Attempt: 2, Uses: 3,
			IssuedAt: at(2 * time.Second), ExpiresAt: at(2*time.Second + domain.DefaultCapabilityTTL)},
		domain.Claimed{ExecutionID: "EXE-5120.2", CapabilityID: "CAP-5120.1", Kind: domain.KindExportDownload, MessageID: "MSG-DL-2",
			WorkerID: "worker-a", Attempt: 2, Use: 2, LeaseEpoch: 1, LeaseExpiresAt: at(4*time.Second + domain.DefaultLeaseDuration),
			IdempotencyKey: "export-OP-5120-a2-u2", ClaimedAt: at(4 * time.Second),
			LeaseSecretDigest: "5d1f0a7c3b9e4d6f8a2b1c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f50618"},
	}, append(append(unversioned(), evidenceOnly()...), regressionStream()...)...)
}

// evidenceOnly are the samples of the types only evidence streams hold
// (never an operation's stream, so never in RefundSamples).
func evidenceOnly() []domain.Event {
	return []domain.Event{
		domain.RefusalsSummarized{Scope: domain.ScopeExecution, ScopeID: "EXE-4471.1", OperationID: "OP-4471",
			WindowStart: time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC),
			BoundPerKey: 16, BoundPerStream: 256, Count: 3,
			Reasons: []domain.ReasonCount{{Type: domain.TypeWriteRefused, Reason: domain.ReasonLeaseNotHeld, Count: 2},
				{Type: domain.TypeWriteRefused, Reason: domain.ReasonCommandInvalid, Count: 1}},
			FirstAt: at(16 * time.Second), LastAt: at(18 * time.Second),
			Principals:      []domain.PrincipalCount{{Principal: "worker-b578d6a6", Count: 2}},
			OtherPrincipals: 1,
			Samples: []domain.RefusalSample{{Type: domain.TypeWriteRefused, Reason: domain.ReasonCommandInvalid, At: at(16 * time.Second),
				Principal: "worker-b578d6a6", WorkerID: "worker-z", MessageID: "MSG-77C", CapabilityID: "CAP-4471.2", ExecutionID: "EXE-4471.1",
				Command: "RecordOutcome", Detail: "forged\\x00", Escaped: []string{"detail"}}},
			SummarizedAt: at(19 * time.Second)},
	}
}

// RefundSamples returns one event of every type as a refund's stream holds
// it: the four kind-stating types as a refund writes them (version 1's
// members all set, one use), the others as Samples has them. They are what
// the version 1 fixtures hold.
func RefundSamples() []domain.Event {
	return append([]domain.Event{
		domain.OperationRequested{OperationID: "OP-4471", Kind: domain.KindRefund, OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
			OrderTotalMinor: 20000, CorrelationID: "COR-2210", RequestedBy: "agent-7", RequestedAt: at(0),
			RequestKey: "idem-2210-1", RequestHash: "9f2c4e1a7b3d5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcd"},
		domain.Decided{DecisionID: "DEC-4471.1", Kind: domain.KindRefund, Verdict: domain.Denied, Reasons: []string{string(domain.ReasonPolicyChargebackOpen)},
			Facts:    domain.Facts{OrderRefundable: true, ChargebackOpen: true, RefundedMinor: 3000, OrderTotalMinor: 20000},
			Approver: "agent-7", ApprovalLimit: 50000, PolicyVersion: domain.PolicyVersion, Attempt: 1, Uses: 1,
			KeyPolicy: domain.KeyPerAttempt, IdempotencyKey: "refund-OP-4471-a1", DecidedAt: at(time.Second)},
		domain.CapabilityIssued{CapabilityID: "CAP-4471.1", DecisionID: "DEC-4471.1", Kind: domain.KindRefund, Attempt: 1, Uses: 1,
			IssuedAt: at(2 * time.Second), ExpiresAt: at(2*time.Second + domain.DefaultCapabilityTTL)},
		domain.Claimed{ExecutionID: "EXE-4471.1", CapabilityID: "CAP-4471.2", Kind: domain.KindRefund, MessageID: "MSG-55A", WorkerID: "worker-a",
			Attempt: 1, Use: 1, LeaseEpoch: 1, LeaseExpiresAt: at(4*time.Second + domain.DefaultLeaseDuration),
			IdempotencyKey: "refund-OP-4471-a1", ClaimedAt: at(4 * time.Second),
			LeaseSecretDigest: "3b7e0f5c2a9d4e6f8a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f50617"},
	}, unversioned()...)
}

// unversioned are the samples of the types at version 1.
func unversioned() []domain.Event {
	return []domain.Event{
		domain.CapabilityRevoked{CapabilityID: "CAP-4471.1", Reason: "agent withdrew", RevokedBy: "agent-7", RevokedAt: at(3 * time.Second)},
		domain.DeliveryDuplicated{MessageID: "MSG-55A", CapabilityID: "CAP-4471.2", WorkerID: "worker-b", ExecutionID: "EXE-4471.1",
			ExecutionState: domain.ExecExecuting, SeenAt: at(5 * time.Second)},
		domain.PresentationRejected{Status: domain.StatusAlreadyConsumed, Reason: domain.ReasonCapabilityAlreadyConsumed,
			MessageID: "MSG-77C", CapabilityID: "CAP-4471.2", OperationID: "OP-4471", WorkerID: "worker-c", ExecutionID: "EXE-4471.1",
			ExecutionAttempted: true, ReplaySuspected: true, Detail: "consumed by message MSG-55A", RejectedAt: at(6 * time.Second)},
		domain.LeaseRenewed{ExecutionID: "EXE-4471.1", LeaseEpoch: 1, LeaseExpiresAt: at(7*time.Second + domain.DefaultLeaseDuration), RenewedAt: at(7 * time.Second)},
		domain.OutcomeRecorded{ExecutionID: "EXE-4471.1", LeaseEpoch: 1, Outcome: domain.Completed, ProviderReference: "re_sim00000001",
			Detail: "200", RecordedAt: at(8 * time.Second)},
		domain.OutcomeUnknown{ExecutionID: "EXE-4471.1", LeaseEpoch: 1, Cause: "timeout after send", RecordedAt: at(9 * time.Second)},
		domain.LeaseLapsed{ExecutionID: "EXE-4471.1", FromEpoch: 1, ToEpoch: 2, LeaseExpiredAt: at(10 * time.Second), LapsedAt: at(11 * time.Second)},
		domain.LateOutcomeRecorded{ExecutionID: "EXE-4471.1", StaleEpoch: 1, Outcome: domain.Completed, ProviderReference: "re_sim00000001",
			Detail: "200 after the lease was lost", RecordedAt: at(12 * time.Second)},
		domain.Reconciled{ExecutionID: "EXE-4471.1", Outcome: domain.Completed, Method: domain.MethodProviderLookup,
			ProviderReference: "re_sim00000001", Actor: "reconciler", Evidence: "found by operation id, succeeded", ReconciledAt: at(13 * time.Second)},
		domain.Escalated{ExecutionID: "EXE-4471.1", Reason: "provider-ambiguous", Detail: "a refund under another key", EscalatedAt: at(14 * time.Second)},
		domain.WriteRefused{ExecutionID: "EXE-4471.1", Command: "RecordOutcome", Reason: domain.ReasonCommandInvalid, LeaseEpoch: 1, CurrentEpoch: 2,
			Outcome: domain.Completed, ProviderReference: "re_sim00000001", Detail: "late 200\\x00", RefusedAt: at(15 * time.Second),
			WorkerID: "worker-a", SecretCheck: domain.SecretWrong, Field: "detail", RefusalDetail: "detail: control character U+0000",
			Escaped: []string{"detail"}},
		domain.LostEffectEscalated{OperationID: "OP-4471", ExecutionID: "EXE-4471.2", LostExecutionID: "EXE-4471.1", Attempt: 1,
			IdempotencyKey: "refund-OP-4471-a1", ProviderReference: "re_sim00000001", Outcome: domain.Completed, AmountMinor: 12000,
			Currency: "EUR", ExportID: "EXP-7781", Source: domain.LostEffectByWorker, Detail: "200, recorded by no execution the store holds",
			FoundAt: at(18 * time.Second)},
	}
}

// regressionStream are the samples of the types only the regression
// stream (evidence-regressions) holds.
func regressionStream() []domain.Event {
	return []domain.Event{
		domain.LogRegressed{Cache: domain.CacheState, Noticer: "serve", Stream: "operation-OP-4471", SeenVersion: 7,
			SeenEventID: "0190d6a2-7c1e-7000-8000-000000000007", HeldVersion: 4, HeldEventID: "0190d6a2-7c1e-7000-8000-0000000000a5",
			SeenPosition: "1042/5120", HeldPosition: "1040/5100",
			SeenExecutions: []domain.SeenExecution{{ExecutionID: "EXE-4471.1", IdempotencyKey: "refund-OP-4471-a1",
				State: domain.ExecCompleted, ProviderReference: "re_sim00000001"}},
			Detail: "the stream ends at version 4; the cache had read version 7", Unrecorded: 3, NoticedAt: at(16 * time.Second)},
		domain.LogRegressionAcknowledged{Through: 12, Regressions: 2, Operator: "ops-anna", Note: "failover at 14:02; provider checked",
			AcknowledgedAt: at(17 * time.Second)},
	}
}
