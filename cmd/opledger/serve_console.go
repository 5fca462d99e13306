package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/console"
	"opledger/adapters/httpapi"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/domain/setaside"
	"opledger/projections"
)

// consoleSettings are serve's settings of the web console at /ui/.
var consoleSettings = []*settings.Setting{settings.Console, settings.ConsoleKey, settings.ConsoleSecureCookies, settings.ConsoleSessionTTL}

// consoleFlags are the console's settings once read.
type consoleFlags struct {
	enabled bool
	key     []byte // nil: a key of this process
	secure  bool
	ttl     time.Duration
}

// consoleFrom reads the console's settings (each validated by the
// catalogue) and its key file, naming the setting at fault.
func consoleFrom(f *settings.Flags) (*consoleFlags, error) {
	c := &consoleFlags{secure: f.Bool(settings.ConsoleSecureCookies), ttl: f.Duration(settings.ConsoleSessionTTL)}
	switch strings.ToLower(f.Text(settings.Console)) {
	case "off", "false", "0", "no":
		return c, nil
	}
	c.enabled = true
	if file := f.Text(settings.ConsoleKey); file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return c, fmt.Errorf("%s: %w", f.Name(settings.ConsoleKey), err)
		}
		if c.key, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw))); err != nil || len(c.key) < console.MinKeyLength {
			return c, fmt.Errorf("%s %s: want base64 of at least %d random bytes (e.g. head -c 32 /dev/urandom | base64)",
				f.Name(settings.ConsoleKey), file, console.MinKeyLength)
		}
	}
	return c, nil
}

// consoleDeps is what the console reads and acts through: serve's own
// ledger, tokens, read models, transport and roles.
type consoleDeps struct {
	pool            *pgxpool.Pool
	viewSchema      string
	transportSchema string
	brokers         []string
	ledger          *ledger.Handler
	tokens          *httpapi.Tokens
	setAside        setaside.Store
	projector       *projections.Projector
	roles           func(context.Context) []httpapi.RoleStatus
	relays          []*transport.Relay
	replication     func() httpapi.Replication // nil: not checked
	regressions     *regression.Monitor
	log             *slog.Logger
}

// mount serves the console at /ui/ beside the API (when enabled) and
// returns what to close on shutdown.
func (f *consoleFlags) mount(api *httpapi.Server, d consoleDeps) (func(), error) {
	if f == nil || !f.enabled {
		return func() {}, nil
	}
	reads, err := projections.NewReads(d.pool, d.viewSchema)
	if err != nil {
		return nil, err
	}
	q, err := pgqueue.New(pgqueue.Config{DB: d.pool, Schema: d.transportSchema, WorkerID: "serve-console", Logger: d.log})
	if err != nil {
		return nil, err
	}
	dead, closeDead, err := openDeadLetters(d.pool, q, d.transportSchema, d.brokers, d.log)
	if err != nil {
		return nil, err
	}
	health := console.Health{ProjectionLag: d.projector.Lag, Roles: d.roles, Replication: d.replication, Regressions: d.regressions}
	if len(d.relays) > 0 {
		health.Relays = func(ctx context.Context) []console.RelayState {
			out := make([]console.RelayState, 0, len(d.relays))
			for _, r := range d.relays {
				lag, err := r.Lag(ctx)
				out = append(out, console.RelayState{Status: r.Status(), Lag: lag, LagErr: err})
			}
			return out
		}
	}
	sessions, err := console.NewPostgresSessions(d.pool, d.transportSchema)
	if err != nil {
		closeDead()
		return nil, err
	}
	ui, err := console.New(console.Config{
		Reads: reads, Ledger: d.ledger, Tokens: d.tokens, DeadLetters: dead, SetAside: d.setAside, Health: health,
		Sessions: sessions, RateLimit: api.TakeRequest,
		SessionKey: f.key, SessionTTL: f.ttl, SecureCookies: f.secure, Logger: d.log,
	})
	if err != nil {
		closeDead()
		return nil, err
	}
	api.Mount(console.Prefix, ui)
	return closeDead, nil
}
