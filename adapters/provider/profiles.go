package provider

import (
	"fmt"
	"slices"
	"strings"

	"opledger/domain"
)

// builtins are the built-in profiles: what each provider documents, as
// data, from the APIs' descriptors (api_*.go). A profile file
// (ParseProfileFile) states the same fields for a provider not listed.
var builtins = builtinProfiles()

func builtinProfiles() []domain.ProviderProfile {
	var out []domain.ProviderProfile
	for _, a := range apis {
		out = append(out, a.Profiles...)
	}
	return out
}

// BuiltinProfiles lists the built-in profiles, API by API.
func BuiltinProfiles() []domain.ProviderProfile { return slices.Clone(builtins) }

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
