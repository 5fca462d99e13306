// Package simbug is the registry of known bugs the simulator (adapters/simworld)
// plants, one at a time, to show that its checks have teeth.
//
// Each bug is one line at its site in the real code:
//
//	if c != nil && c.State == CapConsumed && !simbug.On(simbug.ResetConsumedCapability) {
//
// In every ordinary build On is a constant false (off.go), so the compiler
// removes the branch and a production binary cannot switch a bug on. Only a
// build with the tag simbugs (on.go) compiles a registry in which a test (or
// `opledger sim --plant`, in such a build) plants one bug for a run:
//
//	go test -tags simbugs -run TestPlantedBugs ./adapters/simworld/
//
// The pure model's own bugs are declared and switched in package domain
// (domain/planted.go), so that the model imports nothing of ours; Plant
// switches them there too.
package simbug

import "opledger/domain"

// Bug names one planted bug. The names are stable: replay commands carry them.
type Bug string

// The bugs the simulator must find (docs/simulation.md says how fast each is).
const (
	// SkipOperationBarrier: a claim opens an execution although another
	// execution of the operation is Executing, Unknown, Escalated or
	// Completed (domain/decide_claim.go).
	SkipOperationBarrier Bug = domain.BugSkipOperationBarrier
	// ResetConsumedCapability: spent authority is treated as unspent, as if
	// the capability had been reset (domain/decide_claim.go).
	ResetConsumedCapability Bug = domain.BugResetConsumedCapability
	// FreshKeyPerResend: the provider client mints a new idempotency key for
	// each resend instead of repeating the attempt's key
	// (adapters/provider/client.go).
	FreshKeyPerResend Bug = "fresh-key-per-resend"
	// TimeoutAsNotApplied: a timeout after sending is classified NotApplied
	// instead of Unknown (adapters/provider/classify.go).
	TimeoutAsNotApplied Bug = "timeout-as-not-applied"
	// StaleEpochAccepted: the holder's write is accepted whatever its epoch
	// and the execution's state (domain/decide_execution.go).
	StaleEpochAccepted Bug = domain.BugStaleEpochAccepted
	// LeaseSecretUnchecked: any lease secret, or none, holds the lease
	// (domain/lease_secret.go).
	LeaseSecretUnchecked Bug = domain.BugLeaseSecretUnchecked
	// StateCacheTrustsShorterStream: the command handler's catch-up reads
	// a stream that ends before its cached state as "nothing new" and
	// decides on the cached state (domain/ledger/handler.go, catchUp): a
	// cache that trusts a log that went back.
	StateCacheTrustsShorterStream Bug = "state-cache-trusts-shorter-stream"
)

// All lists every bug, in the order docs/simulation.md gives them.
var All = []Bug{
	SkipOperationBarrier, ResetConsumedCapability, FreshKeyPerResend,
	TimeoutAsNotApplied, StaleEpochAccepted, LeaseSecretUnchecked,
	StateCacheTrustsShorterStream,
}

// Known reports whether b names a bug of All.
func Known(b Bug) bool {
	for _, k := range All {
		if k == b {
			return true
		}
	}
	return false
}
