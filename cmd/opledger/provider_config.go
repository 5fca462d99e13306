package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"opledger/adapters/provider"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
)

// defaultProfile is the profile when neither flag nor variable names one.
var defaultProfile = provider.StripeV1

// resolveProfile returns the provider profile serve's and the worker's
// settings choose: a built-in profile by name (PROVIDER_PROFILE), or a
// profile file (PROVIDER_PROFILE_FILE, adapters/provider ParseProfileFile),
// never both; neither: stripe-v1. Every error names the setting.
func resolveProfile(f *settings.Flags) (domain.ProviderProfile, error) {
	name, file := f.Text(settings.ProviderProfile), f.Text(settings.ProviderProfileFile)
	switch {
	case name != "" && file != "":
		return domain.ProviderProfile{}, fmt.Errorf("%s and %s are both set: name a built-in profile or give a profile file, not both",
			f.Name(settings.ProviderProfile), f.Name(settings.ProviderProfileFile))
	case file != "":
		p, err := loadProfileFile(file)
		if err != nil {
			return domain.ProviderProfile{}, fmt.Errorf("%s %s: %w", f.Name(settings.ProviderProfileFile), file, err)
		}
		return p, nil
	case name != "":
		p, err := provider.ProfileNamed(name)
		if err != nil {
			return domain.ProviderProfile{}, fmt.Errorf("%s: %w", f.Name(settings.ProviderProfile), err)
		}
		return p, nil
	}
	return defaultProfile, nil
}

// loadProfileFile reads and validates a profile file (at most
// provider.MaxProfileFileBytes).
func loadProfileFile(path string) (domain.ProviderProfile, error) {
	fh, err := os.Open(path)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return domain.ProviderProfile{}, pe.Err // the caller names the file
	} else if err != nil {
		return domain.ProviderProfile{}, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, provider.MaxProfileFileBytes+1))
	if err != nil {
		return domain.ProviderProfile{}, err
	}
	return provider.ParseProfileFile(data)
}

// newProviderClient is the provider client of serve and worker: the
// profile's wire adapter at PROVIDER_URL, keeping an idle connection for
// each of the calls its role makes at once.
func newProviderClient(profile domain.ProviderProfile, url string, calls int, log *slog.Logger, observer provider.Observer) (*provider.Client, error) {
	c, err := provider.New(provider.Config{Profile: profile, BaseURL: url, Concurrency: calls, Logger: log, Observer: observer})
	if err != nil {
		return nil, fmt.Errorf("PROVIDER_URL: %w", err)
	}
	return c, nil
}

// settings.ExportDeliveryURL is the export-delivery service's base URL,
// the executor of export downloads (workers deliver through it, the
// reconciler reads it). Empty: none — a worker answers a claimed download
// NotApplied without sending anything, the reconciler escalates an Unknown
// one.

// newExportClient is the export-delivery client of serve and worker, or nil
// when no URL is set; it keeps an idle connection for each of the calls its
// role makes at once.
func newExportClient(url string, calls int, log *slog.Logger, observer provider.Observer) (*provider.ExportClient, error) {
	if url == "" {
		return nil, nil
	}
	c, err := provider.NewExportClient(provider.Config{BaseURL: url, Concurrency: calls, Logger: log, Observer: observer})
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
