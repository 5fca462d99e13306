package provider

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"opledger/domain"
)

// Defaults and bounds of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAttempts = 3
	DefaultBackoffMin  = 200 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
	// MaxAttemptsLimit bounds MaxAttempts: retries are a resilience measure,
	// not a way to wait out an outage (reconciliation does that).
	MaxAttemptsLimit = 10
	// DefaultConcurrency is the calls a client is sized for when its caller
	// does not say: a worker's default concurrency on the Postgres queue.
	DefaultConcurrency = 32
	// MaxConcurrency bounds Concurrency, and so the idle connections a
	// client keeps to its provider.
	MaxConcurrency = 1024
	// maxResponseBytes bounds a response body the client reads.
	maxResponseBytes = 1 << 20
)

// Config configures a Client.
type Config struct {
	// Profile is what the provider documents (its wire adapter, its reads,
	// the metadata key of our reference); zero means StripeV1. A profile
	// that claims a read its API does not have is refused.
	Profile domain.ProviderProfile
	// BaseURL is the provider's root, e.g. "https://api.example.com" or the
	// simulator's URL. Required; http or https.
	BaseURL string
	// HTTPClient sends the requests; defaults to a client over a clone of
	// http.DefaultTransport that keeps Concurrency idle connections to the
	// provider. Its Timeout and CheckRedirect are not used: the client
	// applies Timeout per send and never follows redirects.
	HTTPClient *http.Client
	// Concurrency is how many calls the caller makes at once (a worker's
	// concurrency); default DefaultConcurrency, at most MaxConcurrency. The
	// default transport keeps as many idle connections, so every call after
	// the first burst finds one open instead of dialling (and, against a
	// real provider, a TLS handshake per call). Unused with HTTPClient set.
	Concurrency int
	// APIKey, if set, is sent as a bearer token. It is never logged.
	APIKey string
	// Timeout bounds one send, from dial to the last byte of the response.
	Timeout time.Duration
	// MaxAttempts bounds the sends of one CreateRefund or LookupRefunds.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait before a resend.
	BackoffMin, BackoffMax time.Duration
	// Logger receives a line per send; defaults to discarding.
	Logger *slog.Logger
	// Observer, if set, is told about every send.
	Observer Observer
	// Now measures send latency; defaults to time.Now.
	Now func() time.Time
	// After makes the back-off timer; defaults to time.After. Tests replace
	// it to hold the client in its back-off.
	After func(time.Duration) <-chan time.Time
}

func (c *Config) setDefaults() {
	if c.Profile.Name == "" {
		c.Profile = StripeV1
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	if c.HTTPClient == nil && c.Concurrency > 0 && c.Concurrency <= MaxConcurrency {
		c.HTTPClient = &http.Client{Transport: pooledTransport(c.Concurrency)}
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.BackoffMin = cmp.Or(c.BackoffMin, DefaultBackoffMin)
	c.BackoffMax = cmp.Or(c.BackoffMax, max(DefaultBackoffMax, c.BackoffMin))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
}

func (c *Config) validate() (*url.URL, error) {
	var errs []error
	base, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		errs = append(errs, errors.New("base URL is required"))
	case err != nil:
		errs = append(errs, fmt.Errorf("base URL: %w", err))
	case base.Scheme != "http" && base.Scheme != "https":
		errs = append(errs, fmt.Errorf("base URL %q: scheme must be http or https", base.Redacted()))
	case base.Host == "":
		errs = append(errs, fmt.Errorf("base URL %q has no host", base.Redacted()))
	case base.User != nil:
		errs = append(errs, errors.New("base URL must not carry credentials: use APIKey"))
	}
	if err := c.Profile.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", c.Timeout))
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("concurrency %d must be in [1, %d]", c.Concurrency, MaxConcurrency))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxAttemptsLimit {
		errs = append(errs, fmt.Errorf("max attempts %d must be in [1, %d]", c.MaxAttempts, MaxAttemptsLimit))
	}
	if c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin {
		errs = append(errs, fmt.Errorf("back-off [%s, %s] must satisfy 0 <= min <= max", c.BackoffMin, c.BackoffMax))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("provider client config: %w", err)
	}
	return base, nil
}

// pooledTransport is http.DefaultTransport's clone keeping calls idle
// connections to one host (the default keeps 2: a worker making 32 calls at
// once would open most of them anew, leaving sockets in TIME-WAIT), bounded by
// MaxConcurrency through its caller.
func pooledTransport(calls int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = calls
	t.MaxIdleConns = max(t.MaxIdleConns, calls)
	return t
}
