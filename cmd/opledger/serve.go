package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/adapters/pgqueue"
	"opledger/adapters/provider"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/eventstore"
	"opledger/projections"
)

func init() {
	register("serve", "run the HTTP API, projector, sweeper, reconciler and relay", runServe)
}

// serveRoles are the background roles serve runs beside the API; each can be
// switched off to run it elsewhere.
var serveRoles = []string{"projector", "sweeper", "reconciler", "relay"}

type serveSettings struct {
	listen            string
	providerURL       string
	profile           domain.ProviderProfile
	tokensFile        string
	signingKeyFile    string
	dev               bool
	testClock         bool
	disabled          map[string]bool
	sweepInterval     time.Duration
	reconcileInterval time.Duration
	shutdownTimeout   time.Duration
	brokers           []string
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("serve", "[flags]", stderr)
	db := dbFlags(fs)
	tf := addTransportFlags(fs)
	listen := fs.String("listen", env("OPLEDGER_LISTEN", "127.0.0.1:8080"), "address of the HTTP API [OPLEDGER_LISTEN]")
	providerURL := fs.String("provider-url", env("PROVIDER_URL", ""), "the payment provider's base URL, for the reconciler [PROVIDER_URL]")
	profile := fs.String("provider-profile", env("PROVIDER_PROFILE", domain.StripeV1.Name), "the provider's documented key semantics: stripe-v1 or stripe-v2 [PROVIDER_PROFILE]")
	tokens := fs.String(httpapi.TokensFlag, env(httpapi.TokensEnvVar, ""), "bearer tokens per role: lines 'ROLE TOKEN [NAME]' ["+httpapi.TokensEnvVar+"]")
	signingKey := fs.String(captoken.Flag, env(captoken.EnvVar, ""), "file holding the base64 Ed25519 seed that signs capability tokens ["+captoken.EnvVar+"]")
	dev := fs.Bool("dev", false, "development mode: an ephemeral signing key when none is given (tokens die with the process)")
	testClock := fs.Bool("test-clock", false, "enable POST /v1/test-clock to move the ledger's clock forward (never in production)")
	disable := fs.String("disable", env("OPLEDGER_DISABLE", ""), "background roles not to run here, comma-separated: "+strings.Join(serveRoles, ",")+" [OPLEDGER_DISABLE]")
	sweepEvery := fs.String("sweep-interval", env("OPLEDGER_SWEEP_INTERVAL", "2s"), "how often the sweeper looks for lapsed leases [OPLEDGER_SWEEP_INTERVAL]")
	reconcileEvery := fs.String("reconcile-interval", env("OPLEDGER_RECONCILE_INTERVAL", "3s"), "how often the reconciler examines Unknown executions [OPLEDGER_RECONCILE_INTERVAL]")
	shutdown := fs.Duration("shutdown-timeout", 15*time.Second, "how long requests and roles in flight may take to finish on shutdown")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	s, err := serveConfig(*listen, *providerURL, *profile, *tokens, *signingKey, *dev, *testClock, *disable, *sweepEvery, *reconcileEvery, *shutdown, tf)
	if err != nil {
		return fail(stderr, "serve", err)
	}
	log := newLogger(stderr)
	if err := serve(ctx, db, tf, s, log); err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "serve", err)
	}
	return 0
}

// serveConfig validates serve's settings, naming every one at fault.
func serveConfig(listen, providerURL, profile, tokens, signingKey string, dev, testClock bool, disable string,
	sweep, reconcile string, shutdown time.Duration, tf *transportFlags) (serveSettings, error) {
	s := serveSettings{listen: listen, providerURL: providerURL, tokensFile: tokens, signingKeyFile: signingKey,
		dev: dev, testClock: testClock, disabled: map[string]bool{}, shutdownTimeout: shutdown}
	var errs []error
	var err error
	if s.sweepInterval, err = time.ParseDuration(sweep); err != nil || s.sweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("OPLEDGER_SWEEP_INTERVAL / --sweep-interval %q: want a positive duration like 2s", sweep))
	}
	if s.reconcileInterval, err = time.ParseDuration(reconcile); err != nil || s.reconcileInterval <= 0 {
		errs = append(errs, fmt.Errorf("OPLEDGER_RECONCILE_INTERVAL / --reconcile-interval %q: want a positive duration like 3s", reconcile))
	}
	if listen == "" {
		errs = append(errs, errors.New("OPLEDGER_LISTEN / --listen is empty"))
	}
	p, ok := domain.ProfileByName(profile)
	if !ok {
		errs = append(errs, fmt.Errorf("PROVIDER_PROFILE %q: want %s or %s", profile, domain.StripeV1.Name, domain.StripeV2.Name))
	}
	s.profile = p
	if tokens == "" {
		errs = append(errs, fmt.Errorf("no tokens file: set %s or --%s (lines 'ROLE TOKEN [NAME]')", httpapi.TokensEnvVar, httpapi.TokensFlag))
	}
	if signingKey == "" && !dev {
		errs = append(errs, fmt.Errorf("no signing key: set %s or --%s (a base64 Ed25519 seed), or run with --dev for an ephemeral one", captoken.EnvVar, captoken.Flag))
	}
	for _, r := range strings.Split(disable, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		known := false
		for _, k := range serveRoles {
			known = known || k == r
		}
		if !known {
			errs = append(errs, fmt.Errorf("OPLEDGER_DISABLE: unknown role %q (roles: %s)", r, strings.Join(serveRoles, ", ")))
		}
		s.disabled[r] = true
	}
	if !s.disabled["reconciler"] && providerURL == "" {
		errs = append(errs, errors.New("no provider for the reconciler: set PROVIDER_URL or --provider-url, or --disable reconciler"))
	}
	if shutdown <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if s.brokers, err = tf.kafkaBrokers(); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// serve runs until ctx ends, then stops accepting requests, lets those in
// flight finish, and stops the roles (no lease or batch is started after).
func serve(ctx context.Context, db *dbConfig, tf *transportFlags, s serveSettings, log *slog.Logger) error {
	signer, err := servingSigner(s, log)
	if err != nil {
		return err
	}
	tokens, err := httpapi.LoadTokens(s.tokensFile)
	if err != nil {
		return err
	}
	pool, err := db.pool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	opened, err := db.store(ctx, pool)
	if err != nil {
		return err
	}
	defer opened.Release()
	store := opened.Store
	if err := projections.CheckSchema(ctx, pool, db.viewSchema); err != nil {
		return fmt.Errorf("%w (run 'opledger migrate')", err)
	}
	if err := pgqueue.CheckSchema(ctx, pool, tf.schema); err != nil { // the relay's tables, and every role's set_aside
		return fmt.Errorf("%w (run 'opledger migrate')", err)
	}

	var clk clock.Clock = clock.System{}
	var offset *clock.Offset
	if s.testClock {
		offset = clock.NewOffset(clock.System{})
		clk = offset
		log.Warn("TEST CLOCK ENABLED: POST /v1/test-clock moves the ledger's time; never run this in production")
	}
	lg, err := ledger.New(ledger.Config{Store: store, Clock: clk, Logger: log})
	if err != nil {
		return err
	}
	metrics := httpapi.NewMetrics()
	failing, err := pgqueue.NewSetAside(pool, tf.schema) // the roles' failing items, beside the transport's tables
	if err != nil {
		return err
	}
	projector, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: db.viewSchema, Clock: clk, Logger: log, SetAside: failing})
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{
		Ledger: lg, Signer: signer, Tokens: tokens, ReadModels: pool, Schema: db.viewSchema, Profile: s.profile,
		TestClock: offset, Metrics: metrics, Logger: log, ProjectionLag: projector.Lag, SetAside: failing,
		Ready: readiness(pool, opened.Check, projector, s.disabled["projector"]),
	})
	if err != nil {
		return err
	}

	roles, err := backgroundRoles(db, tf, s, pool, store, lg, projector, metrics, log)
	if err != nil {
		return err
	}
	rctx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for name, run := range roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(rctx); err != nil && rctx.Err() == nil {
				log.Error("role stopped", "role", name, "err", err)
			}
		}()
	}

	srv := httpapi.NewHTTPServer(s.listen, api, log)
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	log.Info("opledger serving", "listen", s.listen, "read_models", db.viewSchema, "store", db.storeKind, "store_schema", db.storeSchema,
		"provider_profile", s.profile.Name, "transport", transportName(s.brokers), "roles", enabledRoles(s.disabled),
		"signing_key", signer.KeyID())

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: requests still in flight were cut off", "err", err)
	}
	stopRoles()
	wg.Wait()
	log.Info("opledger stopped")
	if errors.Is(runErr, http.ErrServerClosed) {
		return nil
	}
	return runErr
}

// servingSigner loads the signing key, or with --dev and none given makes an
// ephemeral one, loudly.
func servingSigner(s serveSettings, log *slog.Logger) (*captoken.Signer, error) {
	if s.signingKeyFile != "" {
		return captoken.LoadSigner(s.signingKeyFile)
	}
	signer, err := captoken.NewEphemeral()
	if err != nil {
		return nil, err
	}
	log.Warn("DEV MODE: capability tokens are signed with an EPHEMERAL key; they become invalid when this process exits. Never run --dev in production.",
		"signing_key", signer.KeyID())
	return signer, nil
}

// readiness is /readyz: the database answers, the event store's schema is
// current, and the projector (when it runs here) is not stalled.
func readiness(pool *pgxpool.Pool, storeCheck func(context.Context) error, p *projections.Projector, projectorOff bool) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := pool.Ping(ctx); err != nil {
			return fmt.Errorf("database: %w", err)
		}
		if err := storeCheck(ctx); err != nil {
			return fmt.Errorf("event store: %w", err)
		}
		if projectorOff {
			return nil
		}
		lag, err := p.Lag(ctx)
		if err != nil {
			return fmt.Errorf("projection lag: %w", err)
		}
		if lag.Behind > maxReadyLag {
			return fmt.Errorf("projector stalled: %s (%d events) behind the log", lag.Behind.Round(time.Second), lag.Events)
		}
		return nil
	}
}

// maxReadyLag is how far behind the projector may be before /readyz fails.
const maxReadyLag = 60 * time.Second

// backgroundRoles builds the enabled roles, each a func run until ctx ends.
func backgroundRoles(db *dbConfig, tf *transportFlags, s serveSettings, pool *pgxpool.Pool, store eventstore.Store,
	lg *ledger.Handler, projector *projections.Projector, metrics *httpapi.Metrics, log *slog.Logger) (map[string]func(context.Context) error, error) {
	roles := map[string]func(context.Context) error{}
	index, err := projections.NewIndex(pool, db.viewSchema)
	if err != nil {
		return nil, err
	}
	failing, err := pgqueue.NewSetAside(pool, tf.schema) // no I/O: the same table serve's projector writes
	if err != nil {
		return nil, err
	}
	if !s.disabled["projector"] {
		roles["projector"] = projector.Run
	}
	if !s.disabled["sweeper"] {
		sw, err := recovery.NewSweeper(recovery.SweeperConfig{Ledger: lg, Index: index, Logger: log, Interval: s.sweepInterval, SetAside: failing})
		if err != nil {
			return nil, err
		}
		roles["sweeper"] = sw.Run
	}
	if !s.disabled["reconciler"] {
		client, err := provider.New(provider.Config{BaseURL: s.providerURL, Logger: log, Observer: metrics})
		if err != nil {
			return nil, fmt.Errorf("PROVIDER_URL: %w", err)
		}
		rc, err := recovery.NewReconciler(recovery.ReconcilerConfig{Ledger: lg, Index: index, Provider: client,
			Profile: s.profile, Logger: log, Interval: s.reconcileInterval, SetAside: failing})
		if err != nil {
			return nil, err
		}
		roles["reconciler"] = func(ctx context.Context) error {
			t := time.NewTicker(s.reconcileInterval)
			defer t.Stop()
			for {
				steps, err := rc.ReconcileOnce(ctx)
				metrics.ObserveReconcile(steps)
				if err != nil && ctx.Err() == nil {
					log.Warn("reconcile round failed", "err", err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
				}
			}
		}
	}
	if !s.disabled["relay"] {
		_, publisher, closePub, err := openTransport(pool, tf, workerSettings{id: "serve-relay", brokers: s.brokers, concurrency: 1}, log)
		if err != nil {
			return nil, err
		}
		checks, err := pgqueue.NewCheckpoints(pool, tf.schema)
		if err != nil {
			closePub()
			return nil, err
		}
		sa, err := pgqueue.NewSetAside(pool, tf.schema)
		if err != nil {
			closePub()
			return nil, err
		}
		relays, err := transport.StandardRelays(transport.RelaysConfig{Store: store, Checkpoints: checks, Publisher: publisher,
			SetAside: sa, Leader: relayLeader(pool, tf.schema), Logger: log})
		if err != nil {
			closePub()
			return nil, err
		}
		roles["relay"] = func(ctx context.Context) error {
			defer closePub()
			var wg sync.WaitGroup
			errs := make([]error, len(relays))
			for i, r := range relays {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = r.Run(ctx) }()
			}
			wg.Wait()
			return errors.Join(errs...)
		}
	}
	return roles, nil
}

func enabledRoles(disabled map[string]bool) string {
	on := []string{"api"}
	for _, r := range serveRoles {
		if !disabled[r] {
			on = append(on, r)
		}
	}
	return strings.Join(on, ",")
}
