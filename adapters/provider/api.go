package provider

import (
	"fmt"
	"io"
	"slices"

	"opledger/domain"
	"opledger/domain/audit"
)

// API describes one provider API opledger speaks, everything that differs
// by API in one place: the name a profile's api field gives, the built-in
// profiles of the providers that speak it, its wire adapter and the reader
// of its export format. The client, retries, classification rules, reads
// and reconciliation around them are shared.
//
// Adding an API is a descriptor of its own (api_stripe.go and
// api_meridian.go are the models) listed in apis, its wire adapter and
// export reader, and the simulator's dialect of it (sim: dialects), which
// keeps wire code of its own: it is the oracle the client is tested
// against. Everything else (the profiles' names, the simulator's profiles
// and key retention, the simulation's provider choice) follows from the
// descriptors. docs/providers.md, "How to add a provider".
type API struct {
	// Name is what a profile's api field says.
	Name string
	// Profiles are the built-in profiles of providers speaking it.
	Profiles []domain.ProviderProfile
	// newWire returns the wire adapter for p (p.API is Name), refusing a
	// profile that claims a read the API does not have.
	newWire func(p domain.ProviderProfile) (wire, error)
	// Export reads the API's export format strictly (ExportReader).
	Export func(r io.Reader) audit.ProviderExport
}

// apis are the provider APIs opledger speaks.
var apis = []API{stripeAPI, meridianAPI}

// APIs lists the provider APIs' names.
var APIs = apiNames()

func apiNames() []string {
	names := make([]string, len(apis))
	for i, a := range apis {
		names[i] = a.Name
	}
	return names
}

// apiNamed returns the API called name.
func apiNamed(name string) (API, bool) {
	i := slices.IndexFunc(apis, func(a API) bool { return a.Name == name })
	if i < 0 {
		return API{}, false
	}
	return apis[i], true
}

// newWire returns the wire adapter p's API names, refusing a profile that
// claims a read its API does not have.
func newWire(p domain.ProviderProfile) (wire, error) {
	a, ok := apiNamed(p.API)
	if !ok {
		return nil, fmt.Errorf("profile %s: unknown api %q (known: %v)", p.Name, p.API, APIs)
	}
	return a.newWire(p)
}
