package domain

// The bugs the simulator may plant in the pure model, to show that its
// checks have teeth (domain/simbug is the registry of every planted bug,
// these and the adapters'). Each is one condition at its site:
//
//	if c != nil && c.State == CapConsumed && !planted(BugResetConsumedCapability) {
//
// In every ordinary build planted is a constant false (planted_off.go), so
// the compiler removes the branch and a production binary cannot switch a
// bug on; only a build with the tag simbugs (planted_on.go) lets
// simbug.Plant switch one on. The pure model so imports nothing of ours.
const (
	// BugSkipOperationBarrier: a claim opens an execution although another
	// execution of the operation is Executing, Unknown, Escalated or
	// Completed (decide_claim.go).
	BugSkipOperationBarrier = "skip-operation-barrier"
	// BugResetConsumedCapability: spent authority is treated as unspent, as
	// if the capability had been reset (decide_claim.go).
	BugResetConsumedCapability = "reset-consumed-capability"
	// BugStaleEpochAccepted: the holder's write is accepted whatever its
	// epoch and the execution's state (decide_execution.go).
	BugStaleEpochAccepted = "stale-epoch-accepted"
	// BugLeaseSecretUnchecked: any lease secret, or none, holds the lease
	// (lease_secret.go).
	BugLeaseSecretUnchecked = "lease-secret-unchecked"
)
