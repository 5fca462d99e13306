package main

import (
	"context"
	"errors"
	"io"

	"opledger/adapters/provider/sim"
)

func init() {
	register("provider-sim", "run the Stripe-style provider simulator (ledger, faults, clock)", runProviderSim)
}

func runProviderSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("provider-sim", "[--listen ADDR] [--profile stripe-v1|stripe-v2]", stderr)
	listen := fs.String("listen", env("PROVIDER_SIM_LISTEN", "127.0.0.1:8081"), "address to serve on [PROVIDER_SIM_LISTEN]")
	profile := fs.String("profile", env("PROVIDER_PROFILE", string(sim.ProfileStripeV1)), "idempotency semantics: stripe-v1 or stripe-v2 [PROVIDER_PROFILE]")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	p, err := sim.ParseProfile(*profile)
	if err != nil {
		return fail(stderr, "provider-sim", err)
	}
	err = sim.ListenAndServe(ctx, *listen, sim.Config{Profile: p, Logger: newLogger(stderr)})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "provider-sim", err)
	}
	return 0
}
