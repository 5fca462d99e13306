package sim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"opledger/adapters/provider"
	"opledger/domain"
)

// Profile names the built-in provider profile the simulator models
// (provider.BuiltinProfiles): its API's shape (the simulator's dialect of
// it, wire.go) and its idempotency semantics, its key retention included,
// all taken from the profile.
type Profile string

// The built-in profiles by name, for callers that pick one.
const (
	// ProfileStripeV1 models Stripe API v1: keys kept 24 h, the saved
	// response replayed even when it was an error.
	ProfileStripeV1 Profile = "stripe-v1"
	// ProfileStripeV2 models Stripe API v2: keys kept 30 days, failed work
	// re-executed under the same key.
	ProfileStripeV2 Profile = "stripe-v2"
	// ProfileMeridian models the Meridian refund-requests API: its own
	// request and error shapes, request ids kept 7 days, failed work
	// re-executed under the same id, a retrieve by request id and no search
	// by the merchant's reference (see the package doc).
	ProfileMeridian Profile = "meridian"
)

// Profiles lists the profiles the simulator models: every built-in one.
var Profiles = builtinProfiles()

func builtinProfiles() []Profile {
	names := provider.BuiltinProfileNames()
	out := make([]Profile, len(names))
	for i, n := range names {
		out[i] = Profile(n)
	}
	return out
}

// ParseProfile validates a profile name.
func ParseProfile(s string) (Profile, error) {
	if p := Profile(s); slices.Contains(Profiles, p) {
		return p, nil
	}
	shown, _ := domain.EvidenceText(s, domain.MaxProfileNameLength)
	return "", fmt.Errorf("unknown provider %s: want one of %v", strconv.Quote(shown), Profiles)
}

// documented is the built-in profile p names (the zero profile for a name
// ParseProfile refuses).
func (p Profile) documented() domain.ProviderProfile {
	d, _ := provider.BuiltinProfile(string(p))
	return d
}

// KeyRetention is how long the profile remembers an idempotency key.
func (p Profile) KeyRetention() time.Duration { return p.documented().KeyRetention }

// ConfigFor returns the configuration that makes the simulator behave as a
// provider profile documents: the simulated profile (by name for a built-in
// one, else the built-in of its API with its re-execution semantics), its
// key retention and the metadata key of our reference. Callers add the
// clock and logger.
func ConfigFor(p domain.ProviderProfile) (Config, error) {
	c := Config{KeyRetention: p.KeyRetention, ReferenceKey: p.ReferenceField}
	if named, err := ParseProfile(p.Name); err == nil {
		c.Profile = named
		return c, nil
	}
	var same []domain.ProviderProfile
	for _, b := range provider.BuiltinProfiles() {
		if b.API == p.API {
			same = append(same, b)
		}
	}
	if len(same) == 0 {
		return Config{}, fmt.Errorf("provider simulator: no simulated provider for profile %s (api %q)", p.Name, p.API)
	}
	c.Profile = Profile(same[0].Name)
	if i := slices.IndexFunc(same, func(b domain.ProviderProfile) bool { return b.ReexecutesFailed == p.ReexecutesFailed }); i >= 0 {
		c.Profile = Profile(same[i].Name)
	}
	if p.KeyRetention == 0 {
		c.KeyRetention = time.Nanosecond // keys kept no time: every request is new
	}
	return c, nil
}

// Default limits, chosen generous for tests and demos yet finite.
const (
	DefaultMaxBodyBytes      = 64 << 10
	DefaultMaxRememberedKeys = 100_000
	DefaultMaxArmedFaults    = 1_000
	DefaultRequestLogSize    = 10_000
)

// Config configures a Simulator. The zero value is usable: stripe-v1, wall
// clock, default limits, logs discarded.
type Config struct {
	// Profile defaults to ProfileStripeV1.
	Profile Profile
	// Start is the simulated clock's reading at New; zero means Clock's
	// reading at New.
	Start time.Time
	// Clock is the base clock the simulated time follows (plus Advance);
	// defaults to time.Now. A constant function freezes the simulated time
	// except for Advance.
	Clock func() time.Time
	// KeyRetention overrides the profile's key retention when positive.
	KeyRetention time.Duration
	// ReferenceKey is the metadata key under which a Stripe-style request
	// carries the merchant's own reference (our operation id): refunds are
	// counted per operation and looked up by it (GET /v1/refunds?KEY=…).
	// Default "operation_id". Meridian keeps the reference in
	// merchantReference and is never searched by it.
	ReferenceKey string
	// MaxBodyBytes limits a request body (413 beyond).
	MaxBodyBytes int64
	// MaxRememberedKeys limits the idempotency keys held at once (429 for a
	// new key beyond it).
	MaxRememberedKeys int
	// MaxArmedFaults limits faults armed and not yet consumed.
	MaxArmedFaults int
	// RequestLogSize limits the request log kept in the ledger.
	RequestLogSize int
	// Logger receives a line per fault applied and per server error.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.Profile = cmp.Or(c.Profile, ProfileStripeV1)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.KeyRetention = cmp.Or(c.KeyRetention, c.Profile.KeyRetention())
	c.ReferenceKey = cmp.Or(c.ReferenceKey, "operation_id")
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxRememberedKeys = cmp.Or(c.MaxRememberedKeys, DefaultMaxRememberedKeys)
	c.MaxArmedFaults = cmp.Or(c.MaxArmedFaults, DefaultMaxArmedFaults)
	c.RequestLogSize = cmp.Or(c.RequestLogSize, DefaultRequestLogSize)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	var errs []error
	if _, err := ParseProfile(string(c.Profile)); err != nil {
		errs = append(errs, err)
	} else if _, ok := dialects[c.Profile.documented().API]; !ok {
		errs = append(errs, fmt.Errorf("profile %s: the simulator has no dialect of api %q", c.Profile, c.Profile.documented().API))
	}
	if c.ReferenceKey != "" && (len(c.ReferenceKey) > maxMetadataKeyLen || domain.CheckText("reference key", c.ReferenceKey, maxMetadataKeyLen, true) != nil) {
		errs = append(errs, fmt.Errorf("reference key %q: 1 to %d printable bytes", c.ReferenceKey, maxMetadataKeyLen))
	}
	if c.KeyRetention < 0 {
		errs = append(errs, fmt.Errorf("key retention %s is negative", c.KeyRetention))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("max body bytes %d is negative", c.MaxBodyBytes))
	}
	if c.MaxRememberedKeys < 0 {
		errs = append(errs, fmt.Errorf("max remembered keys %d is negative", c.MaxRememberedKeys))
	}
	if c.MaxArmedFaults < 0 {
		errs = append(errs, fmt.Errorf("max armed faults %d is negative", c.MaxArmedFaults))
	}
	if c.RequestLogSize < 0 {
		errs = append(errs, fmt.Errorf("request log size %d is negative", c.RequestLogSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("provider simulator config: %w", err)
	}
	return nil
}
