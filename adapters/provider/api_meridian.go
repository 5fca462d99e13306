package provider

import (
	"fmt"
	"time"

	"opledger/domain"
)

// APIMeridian is the Meridian refund-requests API: POST /v3/refund-requests,
// JSON bodies, Meridian-Request-Id, retrieve by request id, no search by our
// reference (meridian_wire.go, export_meridian.go; the simulator's
// meridianDialect).
const APIMeridian = "meridian"

var meridianAPI = API{Name: APIMeridian, Profiles: []domain.ProviderProfile{Meridian}, newWire: newMeridianWire, Export: MeridianExport}

// Meridian: the Meridian refund-requests API. Request ids kept 7 days; a
// request that failed without effect is executed again under its id, but a
// declined refund is kept under it, so a new attempt takes a new key; no
// search by our reference, but a refund request can be retrieved by the
// request id (the idempotency key) it was made under.
var Meridian = domain.ProviderProfile{
	Name: "meridian", API: APIMeridian, KeyRetention: 7 * 24 * time.Hour, ReexecutesFailed: true,
	RetrieveByKey: true, KeyPolicy: domain.KeyPerAttempt,
}

func newMeridianWire(p domain.ProviderProfile) (wire, error) {
	if p.ReferenceField != "" {
		return nil, fmt.Errorf("profile %s: api %s offers no lookup by our reference (it does not search merchant references)", p.Name, p.API)
	}
	return meridianWire{retrieve: p.RetrieveByKey}, nil
}
