package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"opledger/adapters/provider/sim"
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
	fs := flags("provider-sim", "[--listen ADDR] [--provider "+simProviders()+"]", stderr)
	listen := fs.String("listen", env("PROVIDER_SIM_LISTEN", "127.0.0.1:8081"), "address to serve on [PROVIDER_SIM_LISTEN]")
	name := fs.String("provider", "", "the provider to simulate (its API and idempotency semantics): "+simProviders()+" (default "+string(sim.ProfileStripeV1)+") [PROVIDER_PROFILE]")
	old := fs.String("profile", "", "the former name of --provider")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	chosen := *name
	switch {
	case chosen != "" && *old != "" && chosen != *old:
		return fail(stderr, "provider-sim", fmt.Errorf("--provider %q and --profile %q disagree: give one", chosen, *old))
	case chosen == "":
		chosen = cmp.Or(*old, env("PROVIDER_PROFILE", ""), string(sim.ProfileStripeV1))
	}
	p, err := sim.ParseProfile(chosen)
	if err != nil {
		return fail(stderr, "provider-sim", fmt.Errorf("--provider / PROVIDER_PROFILE: %w", err))
	}
	err = sim.ListenAndServe(ctx, *listen, sim.Config{Profile: p, Logger: newLogger(stderr)})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "provider-sim", err)
	}
	return 0
}
