package domain

import "time"

// ProviderProfile states what a provider documents about its idempotency
// keys. Reconciliation and new attempts follow it; nothing in opledger
// assumes semantics a profile does not state.
type ProviderProfile struct {
	Name string
	// KeyRetention is how long the provider remembers a key. Within it, a
	// resend under the same key with identical parameters cannot create a
	// second effect; after it, a resend is a new request.
	KeyRetention time.Duration
	// ReexecutesFailed: a request whose first execution failed is executed
	// again under the same key (Stripe API v2). When false, a saved error is
	// replayed (Stripe API v1).
	ReexecutesFailed bool
	// KeyPolicy is how attempt n+1's key relates to attempt n's.
	KeyPolicy KeyPolicy
}

// The profiles opledger knows.
var (
	// StripeV1: keys kept 24 h, saved responses replayed (errors included),
	// so a new attempt needs a new key.
	StripeV1 = ProviderProfile{Name: "stripe-v1", KeyRetention: 24 * time.Hour, KeyPolicy: KeyPerAttempt}
	// StripeV2: keys kept 30 days, failed requests re-executed under the same
	// key, so a new attempt reuses it.
	StripeV2 = ProviderProfile{Name: "stripe-v2", KeyRetention: 30 * 24 * time.Hour, ReexecutesFailed: true, KeyPolicy: KeyReuseFirst}
)

// ProfileByName returns the named profile.
func ProfileByName(name string) (ProviderProfile, bool) {
	switch name {
	case StripeV1.Name:
		return StripeV1, true
	case StripeV2.Name:
		return StripeV2, true
	}
	return ProviderProfile{}, false
}
