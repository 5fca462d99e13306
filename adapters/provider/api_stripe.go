package provider

import (
	"cmp"
	"fmt"
	"time"

	"opledger/domain"
)

// APIStripe is a Stripe-style refunds API: POST /v1/refunds, form bodies,
// Idempotency-Key, lookup by a metadata key (stripe_wire.go,
// export_stripe.go; the simulator's stripeDialect).
const APIStripe = "stripe"

var stripeAPI = API{Name: APIStripe, Profiles: []domain.ProviderProfile{StripeV1, StripeV2}, newWire: newStripeWire, Export: StripeExport}

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
)

func newStripeWire(p domain.ProviderProfile) (wire, error) {
	if p.RetrieveByKey {
		return nil, fmt.Errorf("profile %s: api %s offers no retrieve by idempotency key", p.Name, p.API)
	}
	return stripeWire{referenceKey: cmp.Or(p.ReferenceField, metaOperationID), lookup: p.ReferenceField != ""}, nil
}
