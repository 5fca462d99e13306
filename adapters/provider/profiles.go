package provider

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"opledger/domain"
)

// The built-in profiles: what each provider documents, as data. A profile
// file (ParseProfileFile) states the same fields for a provider not listed
// here.
var (
	// StripeV1: Stripe API v1 semantics. Keys kept 24 h; a saved response is
	// replayed even when it was an error, so a new attempt needs a new key;
	// refunds can be searched by metadata operation_id.
	StripeV1 = domain.ProviderProfile{
		Name: "stripe-v1", API: APIStripe, KeyRetention: 24 * time.Hour, ReplaysSavedErrors: true,
		ReferenceField: metaOperationID, KeyPolicy: domain.KeyPerAttempt,
	}
	// StripeV2: Stripe API v2 semantics. Keys kept 30 days; a request that
	// failed without effect is executed again under the same key, so a new
	// attempt reuses it; searchable by metadata operation_id.
	StripeV2 = domain.ProviderProfile{
		Name: "stripe-v2", API: APIStripe, KeyRetention: 30 * 24 * time.Hour, ReexecutesFailed: true,
		ReferenceField: metaOperationID, KeyPolicy: domain.KeyReuseFirst,
	}
	// Meridian: the Meridian refund-requests API. Request ids kept 7 days; a
	// request that failed without effect is executed again under its id, but
	// a declined refund is kept under it, so a new attempt takes a new key;
	// no search by our reference, but a refund request can be retrieved by
	// the request id (the idempotency key) it was made under.
	Meridian = domain.ProviderProfile{
		Name: "meridian", API: APIMeridian, KeyRetention: 7 * 24 * time.Hour, ReexecutesFailed: true,
		RetrieveByKey: true, KeyPolicy: domain.KeyPerAttempt,
	}
)

var builtins = []domain.ProviderProfile{StripeV1, StripeV2, Meridian}

// BuiltinProfile returns the built-in profile named name.
func BuiltinProfile(name string) (domain.ProviderProfile, bool) {
	i := slices.IndexFunc(builtins, func(p domain.ProviderProfile) bool { return p.Name == name })
	if i < 0 {
		return domain.ProviderProfile{}, false
	}
	return builtins[i], true
}

// BuiltinProfileNames lists the built-in profiles' names.
func BuiltinProfileNames() []string {
	names := make([]string, len(builtins))
	for i, p := range builtins {
		names[i] = p.Name
	}
	return names
}

// ProfileNamed returns the built-in profile named name, or an error listing
// the names there are.
func ProfileNamed(name string) (domain.ProviderProfile, error) {
	if p, ok := BuiltinProfile(name); ok {
		return p, nil
	}
	shown, _ := domain.EvidenceText(name, domain.MaxProfileNameLength)
	return domain.ProviderProfile{}, fmt.Errorf("unknown provider profile %q: want one of %s, or a profile file",
		shown, strings.Join(BuiltinProfileNames(), ", "))
}
