package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"opledger/adapters/provider"
	"opledger/domain"
)

// providerFlags choose the provider profile of serve and worker: a built-in
// profile by name, or a profile file (adapters/provider, ParseProfileFile),
// never both. Neither: stripe-v1.
type providerFlags struct {
	name *string
	file *string
}

// defaultProfile is the profile when neither flag nor variable names one.
var defaultProfile = provider.StripeV1

func addProviderFlags(fs *flag.FlagSet) *providerFlags {
	return &providerFlags{
		name: fs.String("provider-profile", env("PROVIDER_PROFILE", ""),
			"the provider's built-in profile: "+strings.Join(provider.BuiltinProfileNames(), ", ")+" (default "+defaultProfile.Name+") [PROVIDER_PROFILE]"),
		file: fs.String("provider-profile-file", env("PROVIDER_PROFILE_FILE", ""),
			"a provider profile file (strict JSON; see docs/providers.md) instead of a built-in profile [PROVIDER_PROFILE_FILE]"),
	}
}

// resolve returns the chosen profile; every error names the setting.
func (f *providerFlags) resolve() (domain.ProviderProfile, error) {
	name, file := *f.name, *f.file
	switch {
	case name != "" && file != "":
		return domain.ProviderProfile{}, errors.New("PROVIDER_PROFILE and PROVIDER_PROFILE_FILE are both set: name a built-in profile or give a profile file, not both")
	case file != "":
		return loadProfileFile(file)
	case name != "":
		p, err := provider.ProfileNamed(name)
		if err != nil {
			return domain.ProviderProfile{}, fmt.Errorf("PROVIDER_PROFILE / --provider-profile: %w", err)
		}
		return p, nil
	}
	return defaultProfile, nil
}

// loadProfileFile reads and validates a profile file (at most
// provider.MaxProfileFileBytes).
func loadProfileFile(path string) (domain.ProviderProfile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("PROVIDER_PROFILE_FILE / --provider-profile-file: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, provider.MaxProfileFileBytes+1))
	if err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("PROVIDER_PROFILE_FILE %s: %w", path, err)
	}
	p, err := provider.ParseProfileFile(data)
	if err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("PROVIDER_PROFILE_FILE %s: %w", path, err)
	}
	return p, nil
}

// newProviderClient is the provider client of serve and worker: the
// profile's wire adapter at PROVIDER_URL.
func newProviderClient(profile domain.ProviderProfile, url string, log *slog.Logger, observer provider.Observer) (*provider.Client, error) {
	c, err := provider.New(provider.Config{Profile: profile, BaseURL: url, Logger: log, Observer: observer})
	if err != nil {
		return nil, fmt.Errorf("PROVIDER_URL: %w", err)
	}
	return c, nil
}

// exportDeliveryFlag is the export-delivery service's base URL, the
// executor of export downloads (workers deliver through it, the reconciler
// reads it). Empty: none — a worker answers a claimed download NotApplied
// without sending anything, the reconciler escalates an Unknown one.
func addExportDeliveryFlag(fs *flag.FlagSet) *string {
	return fs.String("export-delivery-url", env("EXPORT_DELIVERY_URL", ""),
		"the export-delivery service's base URL, for export downloads (provider-sim serves one beside the provider); empty: none [EXPORT_DELIVERY_URL]")
}

// newExportClient is the export-delivery client of serve and worker, or nil
// when no URL is set.
func newExportClient(url string, log *slog.Logger, observer provider.Observer) (*provider.ExportClient, error) {
	if url == "" {
		return nil, nil
	}
	c, err := provider.NewExportClient(provider.Config{BaseURL: url, Logger: log, Observer: observer})
	if err != nil {
		return nil, fmt.Errorf("EXPORT_DELIVERY_URL: %w", err)
	}
	return c, nil
}

// parseEnabledKinds reads OPLEDGER_ENABLE_KINDS: operation kinds besides
// refunds that serve creates, comma-separated.
func parseEnabledKinds(s string) ([]domain.OperationKind, error) {
	var out []domain.OperationKind
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		k, err := domain.ParseOperationKind(name)
		if err != nil {
			return nil, fmt.Errorf("OPLEDGER_ENABLE_KINDS / --enable-kinds: %w", err)
		}
		if k != domain.KindRefund {
			out = append(out, k)
		}
	}
	return out, nil
}
