package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
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
	"opledger/domain/ledger"
	"opledger/domain/setaside"
	"opledger/projections"
)

// consoleFlags are serve's settings of the web console at /ui/.
type consoleFlags struct {
	on      *string
	keyFile *string
	secure  *bool
	ttl     *time.Duration

	enabled bool
	key     []byte // nil: a key of this process
}

func addConsoleFlags(fs *flag.FlagSet) *consoleFlags {
	return &consoleFlags{
		on: fs.String("console", env("OPLEDGER_CONSOLE", "on"), "serve the web console at /ui/: on or off [OPLEDGER_CONSOLE]"),
		keyFile: fs.String("console-key", env("OPLEDGER_CONSOLE_KEY_FILE", ""),
			"file holding the console's session key, base64 of at least 32 random bytes; give every instance behind one address the same one (default: a key of this process, sessions end with it) [OPLEDGER_CONSOLE_KEY_FILE]"),
		secure: fs.Bool("console-secure-cookies", false, "mark the console's cookies Secure on plain HTTP too, behind a proxy that terminates TLS (over --tls-cert they are anyway)"),
		ttl:    fs.Duration("console-session-ttl", console.DefaultSessionTTL, "how long a sign-in to the console lasts (1m to 24h)"),
	}
}

// validate reads the settings, naming each one at fault.
func (f *consoleFlags) validate() error {
	switch strings.ToLower(*f.on) {
	case "on", "true", "1", "yes":
		f.enabled = true
	case "off", "false", "0", "no":
		return nil
	default:
		return fmt.Errorf("OPLEDGER_CONSOLE / --console %q: want on or off", *f.on)
	}
	var errs []error
	if *f.ttl < time.Minute || *f.ttl > console.MaxSessionTTL {
		errs = append(errs, fmt.Errorf("--console-session-ttl %s: want 1m to %s", *f.ttl, console.MaxSessionTTL))
	}
	if *f.keyFile != "" {
		raw, err := os.ReadFile(*f.keyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("OPLEDGER_CONSOLE_KEY_FILE / --console-key: %w", err))
		} else if f.key, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw))); err != nil || len(f.key) < console.MinKeyLength {
			errs = append(errs, fmt.Errorf("OPLEDGER_CONSOLE_KEY_FILE / --console-key %s: want base64 of at least %d random bytes (e.g. head -c 32 /dev/urandom | base64)",
				*f.keyFile, console.MinKeyLength))
		}
	}
	return errors.Join(errs...)
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
	health := console.Health{ProjectionLag: d.projector.Lag, Roles: d.roles}
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
	ui, err := console.New(console.Config{
		Reads: reads, Ledger: d.ledger, Tokens: d.tokens, DeadLetters: dead, SetAside: d.setAside, Health: health,
		SessionKey: f.key, SessionTTL: *f.ttl, SecureCookies: *f.secure, Logger: d.log,
	})
	if err != nil {
		closeDead()
		return nil, err
	}
	api.Mount(console.Prefix, ui)
	return closeDead, nil
}
