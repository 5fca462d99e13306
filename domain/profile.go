package domain

import (
	"errors"
	"fmt"
	"time"
)

// ProviderProfile is what a provider documents about its idempotency keys
// and its reads, as data. The roles decide from these capabilities, never
// from a profile's name: reconciliation reads the effect back by our
// reference or by the key where the profile says the provider can, resends
// only inside the key retention, and new attempts follow KeyPolicy. Nothing
// in opledger assumes semantics a profile does not state.
//
// Built-in profiles and the profile file live with the adapters that speak
// to the providers (adapters/provider); the model knows no provider.
type ProviderProfile struct {
	// Name names the profile in logs and errors.
	Name string
	// API names the wire adapter that speaks to the provider (adapters/
	// provider knows the names). The model never branches on it.
	API string
	// KeyRetention is how long the provider remembers a key. Within it, a
	// resend under the same key with identical parameters cannot create a
	// second effect; after it, a resend is a new request. Zero: the provider
	// documents no deduplication, so nothing is ever resent.
	KeyRetention time.Duration
	// ReplaysSavedErrors: a resend under a key whose execution ended in an
	// error gets that saved error again, byte for byte (Stripe API v1).
	ReplaysSavedErrors bool
	// ReexecutesFailed: a resend under a key whose execution failed with no
	// effect is executed again (Stripe API v2). Contradicts
	// ReplaysSavedErrors.
	ReexecutesFailed bool
	// ReferenceField, when set, is the field (a metadata key) our operation
	// id is written to on every request and by which the provider can be
	// asked for the effects carrying it. Empty: the provider offers no
	// lookup by our reference.
	ReferenceField string
	// RetrieveByKey: the provider can be asked for the effect made under an
	// idempotency key (within KeyRetention).
	RetrieveByKey bool
	// KeyPolicy is how attempt n+1's key relates to attempt n's.
	KeyPolicy KeyPolicy
}

// Bounds of a profile's fields.
const (
	MaxProfileNameLength    = 64
	MaxReferenceFieldLength = 40 // the longest metadata key providers commonly take
	MaxProviderKeyRetention = 366 * 24 * time.Hour
	maxProfileAPINameLength = 32
)

// LooksUpByReference reports whether the provider can be asked for the
// effects carrying our reference.
func (p ProviderProfile) LooksUpByReference() bool { return p.ReferenceField != "" }

// CanRead reports whether the provider offers any read that can tell an
// effect happened: without one, reconciliation can only escalate.
func (p ProviderProfile) CanRead() bool { return p.LooksUpByReference() || p.RetrieveByKey }

// ResendIsSafe reports whether the profile documents that resending an
// execution's original request under its original key cannot create a
// second effect, for an execution started age ago: only while the provider
// still remembers the key, with margin kept clear of the retention's end.
func (p ProviderProfile) ResendIsSafe(age, margin time.Duration) bool {
	return p.KeyRetention > 0 && age >= 0 && age < p.KeyRetention-margin
}

// ErrInvalidProfile is wrapped by every Validate failure.
var ErrInvalidProfile = errors.New("invalid provider profile")

// Validate checks every field and names each one at fault.
func (p ProviderProfile) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := checkToken(p.Name, MaxProfileNameLength, "-_."); err != "" {
		bad("name", "%s", err)
	}
	if err := checkToken(p.API, maxProfileAPINameLength, "-"); err != "" {
		bad("api", "%s", err)
	}
	if p.KeyRetention < 0 || p.KeyRetention > MaxProviderKeyRetention {
		bad("key_retention", "%s is outside 0 to %s", p.KeyRetention, MaxProviderKeyRetention)
	}
	if p.ReplaysSavedErrors && p.ReexecutesFailed {
		bad("reexecutes_failed", "contradicts replays_saved_errors: a failed request under a key is either replayed or executed again")
	}
	if p.ReferenceField != "" {
		if err := checkToken(p.ReferenceField, MaxReferenceFieldLength, "-_."); err != "" {
			bad("lookup_by_reference.metadata_key", "%s", err)
		}
	}
	if p.RetrieveByKey && p.KeyRetention == 0 {
		bad("retrieve_by_key", "needs a key_retention: a provider that keeps no key cannot be asked by one")
	}
	switch p.KeyPolicy {
	case KeyPerAttempt:
	case KeyReuseFirst:
		if !p.ReexecutesFailed || p.KeyRetention == 0 {
			bad("key_policy", "%s needs reexecutes_failed and a key_retention: otherwise a new attempt under the old key gets the old answer", KeyReuseFirst)
		}
	default:
		bad("key_policy", "%q is not %s or %s", p.KeyPolicy, KeyPerAttempt, KeyReuseFirst)
	}
	if err := errors.Join(errs...); err != nil {
		name, _ := EvidenceText(p.Name, MaxProfileNameLength)
		return fmt.Errorf("%w %q: %w", ErrInvalidProfile, name, err)
	}
	return nil
}

// checkToken accepts 1..max ASCII letters, digits and the runes of special;
// it returns what is wrong, or "".
func checkToken(s string, max int, special string) string {
	if s == "" {
		return "is required"
	}
	if len(s) > max {
		return fmt.Sprintf("is longer than %d bytes", max)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		for _, c := range special {
			ok = ok || r == c
		}
		if !ok {
			shown, _ := EvidenceText(s, max)
			return fmt.Sprintf("%q: only letters, digits and %q", shown, special)
		}
	}
	return ""
}
