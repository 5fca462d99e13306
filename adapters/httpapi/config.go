package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/domain/setaside"
	"opledger/projections"
)

// Defaults and bounds.
const (
	// DefaultMaxBodyBytes bounds a request body: every request of this API
	// is a small JSON object.
	DefaultMaxBodyBytes = 64 << 10
	// DefaultCommandTimeout bounds one request's work on the store.
	DefaultCommandTimeout = 10 * time.Second
	// DefaultPageSize and MaxPageSize bound the lists the reads return.
	DefaultPageSize = 100
	MaxPageSize     = 1000
	// MaxTestClockAdvance bounds one move of the test clock.
	MaxTestClockAdvance = 400 * 24 * time.Hour
	// maxEvidencePerEscalation bounds the evidence listed with each
	// escalated execution.
	maxEvidencePerEscalation = 20
)

// Config configures a Server. Zero values take defaults.
type Config struct {
	// Ledger executes every command. Required. Its clock is the API's clock.
	Ledger *ledger.Handler
	// Signer issues capability tokens with decisions and verifies the
	// tokens presented with claims (a key ring or one key). Required.
	Signer TokenSigner
	// Tokens authenticates callers. Required.
	Tokens *Tokens
	// ReadModels is the database holding the read models (a *pgxpool.Pool).
	// Required.
	ReadModels projections.Querier
	// Schema is the read models' schema (default projections.DefaultSchema).
	Schema string
	// Profile is the provider profile: decisions take its key policy
	// (default provider.StripeV1).
	Profile domain.ProviderProfile
	// EnabledKinds are the operation kinds besides refunds that POST
	// /v1/operations creates (default none: 422 operation.kind-disabled).
	// An export download's events are written at a version the release
	// before this one refuses: enable it only once every reader runs this
	// release (docs/design.md, "Authority of bounded use").
	EnabledKinds []domain.OperationKind
	// CapabilityTTL is how long an issued capability lives (default
	// domain.DefaultCapabilityTTL).
	CapabilityTTL time.Duration
	// TestClock, when set, enables POST /v1/test-clock. It must be the
	// ledger's clock (and the sweeper's and reconciler's), or moving it
	// would move nothing that judges expiry. Never set it in production.
	TestClock *clock.Offset
	// Ready reports readiness for GET /readyz: nil when the database is
	// reachable and the projector is not stalled. Default: a query on
	// ReadModels.
	Ready func(ctx context.Context) error
	// ProjectionLag, when set, is measured at each scrape of /metrics
	// (e.g. (*projections.Projector).Lag).
	ProjectionLag func(ctx context.Context) (projections.Lag, error)
	// Metrics receives the API's counters; default NewMetrics(). Pass the
	// same Metrics to the worker, reconciler and provider client hooks so
	// that one /metrics shows them all.
	Metrics *Metrics
	// Logger logs every request (method, path, status, duration, role and
	// actor; never a token). Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// CommandTimeout bounds one request's work (default DefaultCommandTimeout).
	CommandTimeout time.Duration
	// SetAside is the loops' failing items, for GET /v1/set-aside and POST
	// /v1/set-aside/release: the store the roles write (serve passes the
	// PostgreSQL one). Default: an empty setaside.Memory, with a warning.
	SetAside setaside.Store
	// RateLimit bounds requests per bearer token (see RateLimit).
	RateLimit RateLimit
	// Status is what /readyz and /metrics report of the roles running
	// beside the API (see Status).
	Status Status
	// Tracing makes a server span of every request (a child of the
	// caller's, from a W3C traceparent header); the ledger's spans are its
	// children. Default: a no-op provider.
	Tracing trace.TracerProvider
	// Regressions follows the regression stream: GET /v1/regressions, POST
	// /v1/regressions/acknowledge, the alarm in /readyz and
	// opledger_log_regression_unacknowledged. Optional (the endpoints
	// answer 404 without it).
	Regressions *regression.Monitor
}

func (c *Config) setDefaults() {
	c.Schema = cmp.Or(c.Schema, projections.DefaultSchema)
	if c.Profile.Name == "" {
		c.Profile = provider.StripeV1
	}
	c.CapabilityTTL = cmp.Or(c.CapabilityTTL, domain.DefaultCapabilityTTL)
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.CommandTimeout = cmp.Or(c.CommandTimeout, DefaultCommandTimeout)
	if c.SetAside == nil {
		c.Logger.Warn("httpapi: no set-aside store configured: /v1/set-aside shows an empty in-memory store")
		c.SetAside = &setaside.Memory{}
	}
	if c.Tracing == nil {
		c.Tracing = noop.NewTracerProvider()
	}
}

func (c *Config) validate() error {
	switch {
	case c.Ledger == nil:
		return errors.New("httpapi config: Ledger is required")
	case c.Signer == nil:
		return errors.New("httpapi config: Signer is required")
	case c.Tokens == nil || c.Tokens.Len() == 0:
		return errors.New("httpapi config: Tokens is required")
	case c.ReadModels == nil:
		return errors.New("httpapi config: ReadModels is required")
	case c.TestClock != nil && clock.Clock(c.TestClock) != c.Ledger.Clock():
		return errors.New("httpapi config: TestClock must be the ledger's clock")
	case c.CapabilityTTL < 0 || c.CapabilityTTL > domain.MaxCapabilityTTL:
		return fmt.Errorf("httpapi config: CapabilityTTL %s outside (0, %s]", c.CapabilityTTL, domain.MaxCapabilityTTL)
	case c.MaxBodyBytes < 1 || c.CommandTimeout <= 0:
		return errors.New("httpapi config: MaxBodyBytes and CommandTimeout must be positive")
	}
	if c.Profile.KeyPolicy != domain.KeyPerAttempt && c.Profile.KeyPolicy != domain.KeyReuseFirst {
		return fmt.Errorf("httpapi config: profile %s has no known key policy", c.Profile.Name)
	}
	for _, k := range c.EnabledKinds {
		if _, ok := domain.PolicyOf(k); !ok || k == "" {
			return fmt.Errorf("httpapi config: EnabledKinds: %q is not one of %v", k, domain.Kinds())
		}
	}
	return nil
}
