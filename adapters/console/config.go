package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"opledger/adapters/httpapi"
	"opledger/adapters/transport"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/projections"
)

// Defaults and bounds.
const (
	// Prefix is where the console is mounted.
	Prefix = "/ui/"
	// DefaultSessionTTL is how long a sign-in lasts; MaxSessionTTL bounds
	// a configured one.
	DefaultSessionTTL = 8 * time.Hour
	MaxSessionTTL     = 24 * time.Hour
	// DefaultRefresh is how often an open page asks whether it changed.
	DefaultRefresh = 5 * time.Second
	// DefaultRequestTimeout bounds one page's or action's work.
	DefaultRequestTimeout = 10 * time.Second
	// pageSize is the rows a list page shows.
	pageSize = 50
	// maxFormBytes bounds a form's body.
	maxFormBytes = 16 << 10
)

// Authenticator tells a bearer token's principal, as the API does:
// *httpapi.Tokens. It must be safe for concurrent use (the tokens file may
// be reloaded behind it).
type Authenticator interface {
	Authenticate(token string) (httpapi.Principal, bool)
}

// RelayState is one relay as the health page shows it.
type RelayState struct {
	Status transport.RelayStatus
	Lag    transport.RelayLag
	// LagErr says why the lag could not be measured.
	LagErr error
}

// Health is what the health page learns from the roles running beside the
// console. Every func is optional and called with the request's bounded
// context; each must be safe for concurrent use.
type Health struct {
	// ProjectionLag measures the read models against the log.
	ProjectionLag func(ctx context.Context) (projections.Lag, error)
	// Roles reports each background role, as /readyz does (serve's
	// supervisor).
	Roles func(ctx context.Context) []httpapi.RoleStatus
	// Relays reports each relay's status and lag.
	Relays func(ctx context.Context) []RelayState
	// Replication reports the event store's replication as last checked,
	// as /readyz does (no I/O).
	Replication func() httpapi.Replication
	// Regressions follows the regression stream: the page raises the alarm
	// of a log regression no operator acknowledged, and an operator
	// acknowledges it there.
	Regressions *regression.Monitor
}

// Config configures a Console. Zero values take defaults.
type Config struct {
	// Reads is the read models' query API. Required.
	Reads *projections.Reads
	// Ledger runs the actions (the same commands as the API) and reads the
	// operations' streams; its clock is the ledger's time the pages show.
	// Required.
	Ledger *ledger.Handler
	// Events reads the operations' streams for their pages (default:
	// Ledger.Store()).
	Events eventstore.Store
	// Tokens authenticates the token pasted at sign-in, and again on every
	// request. Required.
	Tokens Authenticator
	// DeadLetters lists and resubmits the transport's dead letters; nil:
	// the page says there is none configured.
	DeadLetters transport.DeadLetterQueue
	// SetAside lists the loops' failing items and releases them; nil: the
	// health page leaves them out.
	SetAside setaside.Store
	// Health feeds the health page.
	Health Health
	// Sessions keeps the sessions: a cookie is honoured only while its
	// session is open there. Give every instance behind one address the
	// same store (NewPostgresSessions). Required.
	Sessions SessionStore
	// RateLimit counts one request of a bearer token against its rate and
	// says whether it may go on and, if not, how long until it may (serve:
	// the API's per-token limit, httpapi.Server.TakeRequest). nil: no limit.
	RateLimit func(token string) (allowed bool, retryAfter time.Duration)
	// SessionKey seals the cookies and keys the CSRF tokens (at least
	// MinKeyLength bytes). Give every instance behind one address the same
	// key; default: a random key per process (sessions end with it).
	SessionKey []byte
	// SessionTTL bounds a sign-in (default DefaultSessionTTL, at most
	// MaxSessionTTL).
	SessionTTL time.Duration
	// SecureCookies marks the cookies Secure even on plain HTTP requests,
	// for a console behind a proxy that terminates TLS. Requests that
	// arrive over TLS get Secure cookies anyway.
	SecureCookies bool
	// Refresh is how often an open page asks whether it changed (default
	// DefaultRefresh).
	Refresh time.Duration
	// RequestTimeout bounds one page's or action's work (default
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Now is the wall clock sessions expire by (default time.Now); the
	// pages' ages use the ledger's clock.
	Now func() time.Time
	// Logger logs sign-ins, refusals and every action with its actor.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.SessionTTL = cmp.Or(c.SessionTTL, DefaultSessionTTL)
	c.Refresh = cmp.Or(c.Refresh, DefaultRefresh)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	switch {
	case c.Reads == nil:
		return errors.New("console config: Reads is required")
	case c.Ledger == nil:
		return errors.New("console config: Ledger is required")
	case c.Tokens == nil:
		return errors.New("console config: Tokens is required")
	case c.Sessions == nil:
		return errors.New("console config: Sessions is required")
	case c.SessionTTL < time.Minute || c.SessionTTL > MaxSessionTTL:
		return fmt.Errorf("console config: SessionTTL %s outside [1m, %s]", c.SessionTTL, MaxSessionTTL)
	case c.SessionKey != nil && len(c.SessionKey) < MinKeyLength:
		return fmt.Errorf("console config: SessionKey of %d bytes, at least %d are required", len(c.SessionKey), MinKeyLength)
	case c.Refresh < time.Second:
		return errors.New("console config: Refresh must be at least 1s")
	case c.RequestTimeout <= 0:
		return errors.New("console config: RequestTimeout must be positive")
	}
	return nil
}
