package setaside

import (
	"cmp"
	"fmt"
	"time"
)

// Policy bounds how often an item is retried and how far apart. Zero fields
// take the defaults.
type Policy struct {
	// MaxAttempts is how many failed attempts set an item aside (default 5).
	MaxAttempts int
	// Backoff is the pause after the first failure (default 1s); it doubles
	// with every further failure, up to MaxBackoff (default 5m).
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultPolicy is the policy loops use unless configured otherwise.
var DefaultPolicy = Policy{MaxAttempts: 5, Backoff: time.Second, MaxBackoff: 5 * time.Minute}

// WithDefaults fills zero fields from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultPolicy.MaxAttempts)
	p.Backoff = cmp.Or(p.Backoff, DefaultPolicy.Backoff)
	p.MaxBackoff = cmp.Or(p.MaxBackoff, DefaultPolicy.MaxBackoff)
	return p
}

// Validate refuses a policy without a bound.
func (p Policy) Validate() error {
	if p.MaxAttempts < 1 || p.Backoff <= 0 || p.MaxBackoff < p.Backoff {
		return fmt.Errorf("%w: policy needs MaxAttempts >= 1 and 0 < Backoff <= MaxBackoff, got %+v", ErrInvalid, p)
	}
	return nil
}

// Delay is the pause after the attempts-th failure (1-based): Backoff,
// doubled per further failure, at most MaxBackoff.
func (p Policy) Delay(attempts int) time.Duration {
	p = p.WithDefaults()
	d := p.Backoff
	for i := 1; i < attempts && d < p.MaxBackoff; i++ { // bounded by MaxBackoff's doublings
		d *= 2
	}
	return min(d, p.MaxBackoff)
}
