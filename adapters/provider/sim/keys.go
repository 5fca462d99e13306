package sim

import "time"

// keyRecord is what the simulator remembers under one idempotency key.
// Guarded by Simulator.mu.
type keyRecord struct {
	fingerprint string    // parameters of the first request
	firstSeen   time.Time // simulated clock; retention counts from here
	inProgress  bool      // a request under this key is executing
	saved       answer    // the saved result, once execution finished
	refundID    string    // the refund committed under this key, if any
	operationID string    // the merchant's reference of the first request
}

// failedWithoutEffect reports whether the saved result is a failure under
// which nothing was committed: the case stripe-v2 and meridian execute
// again.
func (k *keyRecord) failedWithoutEffect() bool {
	return k.refundID == "" && (k.saved.status < 200 || k.saved.status > 299)
}

func (k *keyRecord) seenAt() time.Time { return k.firstSeen }
func (k *keyRecord) executing() bool   { return k.inProgress }

// pruneKeysLocked forgets the keys older than the retention, oldest first,
// unless a request under one is still executing (keyStore.forget). It runs
// on every creation request, so the number of keys is bounded by the
// creation rate over the retention (and by Config.MaxRememberedKeys).
func (s *Simulator) pruneKeysLocked(now time.Time) { s.keys.forget(now) }

// replaysSavedErrors reports whether a repeated key gets its saved answer
// whatever it was (stripe-v1), rather than the committed refund's current
// state or a new execution (stripe-v2, meridian): the profile's
// ReplaysSavedErrors.
func (s *Simulator) replaysSavedErrors() bool { return s.replaysErrors }
