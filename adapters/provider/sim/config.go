package sim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Profile selects the idempotency semantics the simulator models.
type Profile string

const (
	// ProfileStripeV1 models Stripe API v1: keys kept 24 h, the saved
	// response replayed even when it was an error.
	ProfileStripeV1 Profile = "stripe-v1"
	// ProfileStripeV2 models Stripe API v2: keys kept 30 days, failed work
	// re-executed under the same key.
	ProfileStripeV2 Profile = "stripe-v2"
)

// ParseProfile validates a profile name ("stripe-v1" or "stripe-v2").
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(s); p {
	case ProfileStripeV1, ProfileStripeV2:
		return p, nil
	}
	return "", fmt.Errorf("unknown provider profile %q: want %q or %q", s, ProfileStripeV1, ProfileStripeV2)
}

// KeyRetention is how long the profile remembers an idempotency key.
func (p Profile) KeyRetention() time.Duration {
	if p == ProfileStripeV2 {
		return 30 * 24 * time.Hour
	}
	return 24 * time.Hour
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
