package domain

import (
	"fmt"
	"strconv"
)

// OperationKind names what an operation's effect is. A kind declares its
// effect policy (EffectPolicy): how many times authority may be used, and
// whether the effect may take place more than once. Never rename a kind:
// stored history names it.
type OperationKind string

const (
	// KindRefund: one refund at a payment provider. Single use, with the
	// one-consequential-execution barrier (invariant 3). Every operation
	// recorded before kinds existed is a refund.
	KindRefund OperationKind = "refund"
	// KindExportDownload: a download of a generated export, which may be
	// delivered up to N times under one capability of N uses ("three
	// downloads of a generated export"), one use per claim, one execution
	// open at a time.
	KindExportDownload OperationKind = "export-download"
)

// MaxExportDownloads bounds the uses one export-download decision may
// authorize: bounded authority stays small; a holder who needs more asks for
// a new decision.
const MaxExportDownloads = 10

// EffectPolicy is what an operation kind declares about its effect. The
// model decides from it, never from the kind's name.
type EffectPolicy struct {
	Kind OperationKind
	// MaxUses bounds the uses a decision of the kind may authorize, and so
	// the uses of its capability: 1 for a single-use kind.
	MaxUses int
	// Repeats: the effect may take place once per use, up to the
	// capability's uses (bounded use): a new use opens only when no
	// execution of the operation is Executing, Unknown or Escalated;
	// Completed and NotApplied uses count against the capability's uses.
	// False: at most one consequential execution per operation (invariant
	// 3): a new execution opens only when every earlier one is NotApplied,
	// and a Completed one ends the operation.
	Repeats bool
	// KeyPrefix starts the provider keys of the kind's executions
	// ("refund-OP-4471-a1", "export-OP-5120-a1-u2").
	KeyPrefix string
	// PolicyVersion names the policy that decides the kind's operations; a
	// decision records it.
	PolicyVersion string
	// PublishOnIssue: the relay publishes one effect request per issued
	// capability (a refund is executed once it is authorized). False: each
	// use is presented by the capability's holder (a download is asked
	// for), so issuing publishes nothing.
	PublishOnIssue bool
}

// Policy versions of the kinds this build decides.
const (
	// PolicyVersion names the refund policy this build evaluates.
	PolicyVersion = "refund-policy/v1"
	// ExportPolicyVersion names the export-download policy.
	ExportPolicyVersion = "export-policy/v1"
)

var policies = []EffectPolicy{
	{Kind: KindRefund, MaxUses: 1, KeyPrefix: "refund", PolicyVersion: PolicyVersion, PublishOnIssue: true},
	{Kind: KindExportDownload, MaxUses: MaxExportDownloads, Repeats: true, KeyPrefix: "export", PolicyVersion: ExportPolicyVersion},
}

// Kinds lists the operation kinds this build knows, refunds first.
func Kinds() []OperationKind {
	out := make([]OperationKind, len(policies))
	for i, p := range policies {
		out[i] = p.Kind
	}
	return out
}

// PolicyOf returns the effect policy of kind; "" is a refund (what every
// operation was before kinds existed).
func PolicyOf(kind OperationKind) (EffectPolicy, bool) {
	if kind == "" {
		kind = KindRefund
	}
	for _, p := range policies {
		if p.Kind == kind {
			return p, true
		}
	}
	return EffectPolicy{}, false
}

// ParseOperationKind validates a kind named by a caller; "" is a refund.
func ParseOperationKind(s string) (OperationKind, error) {
	p, ok := PolicyOf(OperationKind(s))
	if !ok {
		shown, _ := EvidenceText(s, MaxIDLength)
		return "", fmt.Errorf("%w: operation kind %q is not one of %v", ErrInvalidID, shown, Kinds())
	}
	return p.Kind, nil
}

// AttemptKey derives the provider key of an attempt of an operation of this
// kind: <prefix>-<OperationId>-a<attempt> (for refunds, IdempotencyKeyFor).
// A decision records it.
func (p EffectPolicy) AttemptKey(op OperationID, attempt int) IdempotencyKey {
	return IdempotencyKey(p.KeyPrefix + "-" + string(op) + "-a" + strconv.Itoa(attempt))
}

// UseKey derives the provider key of one use from its attempt's key: the
// attempt's key itself for a single-use kind, <attempt key>-u<use> for a
// kind of bounded use. It is computed at the claim, before any retry logic
// runs, so every resend of one use carries the same key, and no two uses
// of an operation share one.
func (p EffectPolicy) UseKey(attemptKey IdempotencyKey, use int) IdempotencyKey {
	if !p.Repeats {
		return attemptKey
	}
	return IdempotencyKey(string(attemptKey) + "-u" + strconv.Itoa(use))
}

// Blocks reports whether an execution in state s keeps a new one of this
// kind from opening: for a single-use kind every state but NotApplied
// (invariant 3); for a kind of bounded use the open states, Executing,
// Unknown and Escalated (at most one execution open at a time, and Unknown
// still blocks until it is reconciled).
func (p EffectPolicy) Blocks(s ExecutionState) bool {
	if p.Repeats {
		return s.Open()
	}
	return s.Blocks()
}

// stated reads a use count or use number an event states: 0, unstated, is
// 1 for a single-use kind (an event built without it, as every event was
// before kinds existed) and stays 0, invalid, for a kind of bounded use,
// whose events always state it.
func (p EffectPolicy) stated(n int) int {
	if n == 0 && !p.Repeats {
		return 1
	}
	return n
}
