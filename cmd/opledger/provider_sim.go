package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"opledger/adapters/provider/sim"
	"opledger/cmd/opledger/internal/settings"
)

func init() {
	register("provider-sim", "run the provider simulator: Stripe-style or Meridian (ledger, faults, clock)", runProviderSim)
}

func simProviders() string {
	names := make([]string, len(sim.Profiles))
	for i, p := range sim.Profiles {
		names[i] = string(p)
	}
	return strings.Join(names, "|")
}

func runProviderSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("provider-sim", "[--listen ADDR] [--provider "+simProviders()+"] [flags]", stderr)
	f.Bind(settings.ProviderSimListen, settings.ProviderProfile, settings.LogLevel) // --provider here: the provider to simulate
	old := f.Local().String("profile", "", "the former name of --provider")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	chosen := f.Text(settings.ProviderProfile)
	switch {
	case *old != "" && f.Source(settings.ProviderProfile) == settings.FromFlag && chosen != *old:
		return fail(stderr, "provider-sim", fmt.Errorf("--provider %q and --profile %q disagree: give one", chosen, *old))
	case *old != "":
		chosen = *old
	}
	p, err := sim.ParseProfile(cmp.Or(chosen, string(sim.ProfileStripeV1)))
	if err != nil {
		return fail(stderr, "provider-sim", fmt.Errorf("%s: %w", f.Name(settings.ProviderProfile), err))
	}
	err = sim.ListenAndServe(ctx, f.Text(settings.ProviderSimListen), sim.Config{Profile: p, Logger: newLogger(stderr, f)})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "provider-sim", err)
	}
	return 0
}
