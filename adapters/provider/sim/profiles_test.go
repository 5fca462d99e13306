package sim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
)

// TestEveryBuiltinProfileIsSimulatedAsDocumented: the simulator models
// every built-in profile, in its API's dialect, keeping keys as long as the
// profile says (its retention is stated once, in the profile).
func TestEveryBuiltinProfileIsSimulatedAsDocumented(t *testing.T) {
	require.Len(t, sim.Profiles, len(provider.BuiltinProfiles()))
	for _, p := range provider.BuiltinProfiles() {
		s, err := sim.New(sim.Config{Profile: sim.Profile(p.Name), Start: t0, Clock: func() time.Time { return t0 }})
		require.NoError(t, err, p.Name)
		s.Close()
		require.Equal(t, p.KeyRetention, sim.Profile(p.Name).KeyRetention(), p.Name)
		cfg, err := sim.ConfigFor(p)
		require.NoError(t, err, p.Name)
		require.Equal(t, sim.Profile(p.Name), cfg.Profile)
		require.Equal(t, p.KeyRetention, cfg.KeyRetention)
	}
	// A profile file's provider is simulated by the built-in of its API
	// with the same re-execution semantics.
	custom := provider.StripeV1
	custom.Name, custom.ReplaysSavedErrors, custom.ReexecutesFailed = "acme-stripe", false, true
	cfg, err := sim.ConfigFor(custom)
	require.NoError(t, err)
	require.Equal(t, sim.ProfileStripeV2, cfg.Profile)
	custom.ReexecutesFailed = false
	cfg, err = sim.ConfigFor(custom)
	require.NoError(t, err)
	require.Equal(t, sim.ProfileStripeV1, cfg.Profile)
	custom.API = "teleport"
	_, err = sim.ConfigFor(custom)
	require.ErrorContains(t, err, `no simulated provider for profile acme-stripe (api "teleport")`)
}
