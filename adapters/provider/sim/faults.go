package sim

import (
	"fmt"
	"slices"
	"time"
)

// FaultKind names a fault the simulator can inject (see the package doc).
type FaultKind string

const (
	// FaultLoseResponseAfterCommit creates the refund, saves the 200 under
	// the key, then closes the connection without answering.
	FaultLoseResponseAfterCommit FaultKind = "lose-response-after-commit"
	// FaultHoldResponse creates the refund and withholds the response, the
	// key still in progress, until Release, the client leaving, or Close.
	FaultHoldResponse FaultKind = "hold-response"
	// Fault5xxBeforeCommit answers 500 api_error without creating anything.
	Fault5xxBeforeCommit FaultKind = "5xx-before-commit"
	// Fault5xxAfterCommit creates the refund, then answers 500 api_error.
	Fault5xxAfterCommit FaultKind = "5xx-after-commit"
	// FaultRejectValidation answers a documented 400 invalid_request_error
	// raised by the endpoint before it changes anything.
	FaultRejectValidation FaultKind = "reject-validation"
	// FaultDelay waits Fault.Duration (real time) before handling the
	// request, abandoning it if the client leaves.
	FaultDelay FaultKind = "delay"
	// FaultDropConnectionBeforeRead closes the connection as the request
	// arrives, before the API reads it: nothing executed, nothing saved.
	FaultDropConnectionBeforeRead FaultKind = "drop-connection-before-read"
	// FaultDecline executes the request and commits the refund as declined
	// (Stripe "failed", Meridian DECLINED): answered 2xx, saved under the
	// key like any committed refund, and nothing moved.
	FaultDecline FaultKind = "decline"
)

// FaultKinds lists every fault kind.
var FaultKinds = []FaultKind{
	FaultLoseResponseAfterCommit, FaultHoldResponse, Fault5xxBeforeCommit, Fault5xxAfterCommit,
	FaultRejectValidation, FaultDelay, FaultDropConnectionBeforeRead, FaultDecline,
}

// MaxFaultDelay bounds a delay fault, so that no handler waits unboundedly.
const MaxFaultDelay = 10 * time.Minute

// faultStage says when a fault kind is matched against a request.
type faultStage int

const (
	stageArrival   faultStage = iota // as the request arrives
	stageExecution                   // as a request begins executing
)

func (k FaultKind) stage() faultStage {
	if k == FaultDelay || k == FaultDropConnectionBeforeRead {
		return stageArrival
	}
	return stageExecution
}

// Fault is one armed fault. It applies to the next refund-creation request
// that reaches its stage and, when OperationID is set, whose metadata
// operation_id equals it.
type Fault struct {
	Kind        FaultKind     `json:"kind"`
	OperationID string        `json:"operation_id,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"` // FaultDelay only
}

func (f Fault) validate() error {
	if !slices.Contains(FaultKinds, f.Kind) {
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	if f.Kind == FaultDelay && (f.Duration <= 0 || f.Duration > MaxFaultDelay) {
		return fmt.Errorf("delay fault: duration %s must be in (0, %s]", f.Duration, MaxFaultDelay)
	}
	if f.Kind != FaultDelay && f.Duration != 0 {
		return fmt.Errorf("%s fault: duration applies only to %s", f.Kind, FaultDelay)
	}
	if len(f.OperationID) > maxMetadataValueLen {
		return fmt.Errorf("fault operation id longer than %d bytes", maxMetadataValueLen)
	}
	return nil
}

// Arm adds f to the armed faults. It fails for an invalid fault or when
// Config.MaxArmedFaults are already armed.
func (s *Simulator) Arm(f Fault) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("arm fault: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) >= s.cfg.MaxArmedFaults {
		return fmt.Errorf("arm fault %s: %d faults already armed", f.Kind, len(s.faults))
	}
	s.faults = append(s.faults, f)
	return nil
}

// ArmedFaults returns the faults armed and not yet consumed, in order.
func (s *Simulator) ArmedFaults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.faults)
}

// takeFaultOfLocked is takeFaultLocked for the armed faults of the given
// kinds only (the export-delivery service's): the others stay armed.
func (s *Simulator) takeFaultOfLocked(stage faultStage, operationID string, kinds []FaultKind) (Fault, bool) {
	for i, f := range s.faults {
		if f.Kind.stage() == stage && (f.OperationID == "" || f.OperationID == operationID) && slices.Contains(kinds, f.Kind) {
			s.faults = slices.Delete(s.faults, i, i+1)
			return f, true
		}
	}
	return Fault{}, false
}

// takeFaultLocked removes and returns the first armed fault of stage that
// matches operationID.
func (s *Simulator) takeFaultLocked(stage faultStage, operationID string) (Fault, bool) {
	for i, f := range s.faults {
		if f.Kind.stage() == stage && (f.OperationID == "" || f.OperationID == operationID) {
			s.faults = slices.Delete(s.faults, i, i+1)
			return f, true
		}
	}
	return Fault{}, false
}
