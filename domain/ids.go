// Package domain is opledger's pure model of an operation (a refund, an
// export download: its kind's effect policy, kind.go): identifiers,
// events, the state an operation's stream folds into (Evolve), and the
// decisions that turn a command and that state into new events or a refusal.
// It performs no I/O and reads no clock: time comes in as an argument.
package domain

import (
	"fmt"
	"strings"
)

// Each identifier is its own type so that one can never be passed where
// another is expected. Parse* functions validate; the zero value is "absent".
type (
	// OperationID names one logical business operation across all its attempts.
	OperationID string
	// CapabilityID names one bounded authority: N uses (a refund's: one).
	CapabilityID string
	// DecisionID names one policy evaluation.
	DecisionID string
	// ExecutionID names one claimed use (of an attempt) under one capability.
	ExecutionID string
	// CorrelationID groups one end-to-end story; it never authorizes.
	CorrelationID string
	// MessageID names one transport message; a resubmission may change it.
	MessageID string
	// IdempotencyKey is what the provider dedups on: derived from the
	// operation and the authorized attempt, never per call.
	IdempotencyKey string
)

// Prefixes of the identifiers opledger mints.
const (
	PrefixOperation   = "OP-"
	PrefixCapability  = "CAP-"
	PrefixDecision    = "DEC-"
	PrefixExecution   = "EXE-"
	PrefixCorrelation = "COR-"
)

// MaxIDLength bounds every identifier, ours and the transport's.
const MaxIDLength = 128

// ErrInvalidID is wrapped by every Parse* failure.
var ErrInvalidID = fmt.Errorf("invalid identifier")

func parseMinted(kind, prefix, s string) error {
	if !strings.HasPrefix(s, prefix) || len(s) == len(prefix) {
		return fmt.Errorf("%w: %s %q must look like %s<suffix>", ErrInvalidID, kind, s, prefix)
	}
	return checkChars(kind, s, false)
}

func checkChars(kind, s string, anyPrintable bool) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidID, kind)
	}
	if len(s) > MaxIDLength {
		return fmt.Errorf("%w: %s is %d bytes long, at most %d", ErrInvalidID, kind, len(s), MaxIDLength)
	}
	for _, r := range s {
		ok := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if anyPrintable {
			ok = r > ' ' && r < 0x7f
		}
		if !ok {
			return fmt.Errorf("%w: %s %q contains %q", ErrInvalidID, kind, s, r)
		}
	}
	return nil
}

// refuseID is a command.invalid refusal naming field for a Parse* failure.
// The failure's text quotes the identifier escaped (%q), so hostile input
// reaches no event unescaped.
func refuseID(field string, err error) *Refusal {
	return refuseField(field, "%s: %v", field, err)
}

// ParseOperationID validates an operation id ("OP-4471").
func ParseOperationID(s string) (OperationID, error) {
	return OperationID(s), parseMinted("operation id", PrefixOperation, s)
}

// ParseCapabilityID validates a capability id ("CAP-91F").
func ParseCapabilityID(s string) (CapabilityID, error) {
	return CapabilityID(s), parseMinted("capability id", PrefixCapability, s)
}

// ParseDecisionID validates a decision id ("DEC-3381").
func ParseDecisionID(s string) (DecisionID, error) {
	return DecisionID(s), parseMinted("decision id", PrefixDecision, s)
}

// ParseExecutionID validates an execution id ("EXE-1").
func ParseExecutionID(s string) (ExecutionID, error) {
	return ExecutionID(s), parseMinted("execution id", PrefixExecution, s)
}

// ParseCorrelationID validates a correlation id. Correlation ids may come from
// callers, so any printable ASCII without spaces is accepted.
func ParseCorrelationID(s string) (CorrelationID, error) {
	return CorrelationID(s), checkChars("correlation id", s, true)
}

// ParseMessageID validates a transport message id: printable ASCII without
// spaces, at most MaxIDLength bytes. Publishers choose its form.
func ParseMessageID(s string) (MessageID, error) {
	return MessageID(s), checkChars("message id", s, true)
}

// StreamName is the event stream of an operation: "operation-<OperationId>".
func (id OperationID) StreamName() string { return OperationStreamPrefix + string(id) }

// OperationStreamPrefix starts the name of every operation stream.
const OperationStreamPrefix = "operation-"

// EvidenceStream holds evidence that cannot be tied to an existing operation
// (an unknown operation, a forged or malformed capability).
const EvidenceStream = "evidence-unattributed"

// OperationIDFromStream returns the operation of an operation stream name.
func OperationIDFromStream(stream string) (OperationID, bool) {
	s, ok := strings.CutPrefix(stream, OperationStreamPrefix)
	return OperationID(s), ok && s != ""
}

// IdempotencyKeyFor derives the provider key of an attempt:
// refund-<OperationId>-a<attempt>. It is computed once per attempt, before any
// retry logic runs, so every resend carries the same key.
func IdempotencyKeyFor(op OperationID, attempt int) IdempotencyKey {
	return IdempotencyKey(fmt.Sprintf("refund-%s-a%d", op, attempt))
}

func (id OperationID) String() string   { return string(id) }
func (id CapabilityID) String() string  { return string(id) }
func (id DecisionID) String() string    { return string(id) }
func (id ExecutionID) String() string   { return string(id) }
func (id CorrelationID) String() string { return string(id) }
func (id MessageID) String() string     { return string(id) }
func (k IdempotencyKey) String() string { return string(k) }

// ChildID mints the n-th identifier of a kind within operation op:
// prefix + op's suffix + "." + n, e.g. ChildID(PrefixExecution, "OP-4471", 1)
// is "EXE-4471.1". Such ids are deterministic (a retried command mints the
// same one), unique across operations, and name their operation, so an API
// given only an execution or capability id can find its stream.
func ChildID(prefix string, op OperationID, n int) string {
	return fmt.Sprintf("%s%s.%d", prefix, strings.TrimPrefix(string(op), PrefixOperation), n)
}

// OperationOf returns the operation a ChildID-minted id belongs to.
func OperationOf(id string) (OperationID, bool) {
	for _, p := range []string{PrefixExecution, PrefixCapability, PrefixDecision} {
		rest, ok := strings.CutPrefix(id, p)
		if !ok {
			continue
		}
		dot := strings.LastIndexByte(rest, '.')
		if dot <= 0 || dot == len(rest)-1 {
			return "", false
		}
		for _, r := range rest[dot+1:] {
			if r < '0' || r > '9' {
				return "", false
			}
		}
		return OperationID(PrefixOperation + rest[:dot]), true
	}
	return "", false
}
