package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"opledger/adapters/provider"
	"opledger/domain/audit"
)

// maxProviderExport bounds the export serve's lost-effect check reads at
// once (it is held in memory while checked): about 300,000 refunds. A
// larger provider's export is pointed at a file of the recent window.
const maxProviderExport = 64 << 20

// providerExportTimeout bounds one fetch of the export.
const providerExportTimeout = 30 * time.Second

// providerExportSource reads the provider's export at where (an http(s)
// URL, or a file) in the format of profile's API, as audit provider-diff
// reads it; nil when where is empty (no export: the lost-effect check asks
// the provider only about what a log regression named).
func providerExportSource(where, profile string) func(context.Context) (audit.ProviderExport, error) {
	if where == "" {
		return nil
	}
	return func(ctx context.Context) (audit.ProviderExport, error) {
		raw, err := fetchExport(ctx, where)
		if err != nil {
			return nil, err
		}
		return provider.ExportReader(profile, bytes.NewReader(raw))
	}
}

func fetchExport(ctx context.Context, where string) ([]byte, error) {
	var r io.ReadCloser
	if strings.HasPrefix(where, "http://") || strings.HasPrefix(where, "https://") {
		ctx, cancel := context.WithTimeout(ctx, providerExportTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
		if err != nil {
			return nil, fmt.Errorf("provider export %s: %w", where, err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("provider export: %w", err)
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			return nil, fmt.Errorf("provider export %s: %s", where, res.Status)
		}
		r = res.Body
	} else {
		f, err := os.Open(where)
		if err != nil {
			return nil, fmt.Errorf("provider export: %w", err)
		}
		r = f
	}
	defer r.Close()
	raw, err := io.ReadAll(io.LimitReader(r, maxProviderExport+1))
	if err != nil {
		return nil, fmt.Errorf("provider export %s: %w", where, err)
	}
	if len(raw) > maxProviderExport {
		return nil, fmt.Errorf("provider export %s: larger than %d MiB: point OPLEDGER_PROVIDER_EXPORT at a file of the recent window", where, maxProviderExport>>20)
	}
	return raw, nil
}
