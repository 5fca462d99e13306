package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/projections"
)

func init() {
	register("serve", "run the HTTP API, projector, sweeper, reconciler and relay", runServe)
}

type serveSettings struct {
	listen            string
	providerURL       string
	profile           domain.ProviderProfile
	tokensFile        string
	signingKeyFile    string // one key (--signing-key)
	signingKeys       string // a key ring (--signing-keys DIR|FILE)
	tlsCert, tlsKey   string
	rateLimit         httpapi.RateLimit
	dev               bool
	testClock         bool
	disabled          map[string]bool
	sweepInterval     time.Duration
	reconcileInterval time.Duration
	shutdownTimeout   time.Duration
	roleBackoff       time.Duration
	roleMaxFailures   int
	brokers           []string
	digests           *digestFlags  // serve_digest.go
	console           *consoleFlags // serve_console.go
	// enabledKinds are the operation kinds besides refunds the API creates;
	// exportURL the export-delivery service the reconciler reads.
	enabledKinds []domain.OperationKind
	exportURL    string
	// providerExport is where the reconciler's lost-effect check reads
	// the provider's export ("" none).
	providerExport string
	tracing        tracingConfig       // tracing.go
	replication    replicationSettings // replication.go
}

// serveFlags binds serve's settings.
func serveFlags(stderr io.Writer) *settings.Flags {
	f := newFlags("serve", "[flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.ReadModelSchema, settings.TransportSchema, settings.KafkaBrokers,
		settings.ProviderURL, settings.ProviderProfile, settings.ProviderProfileFile,
		settings.Listen, settings.TokensFile, settings.SigningKeys, settings.SigningKeyFile, settings.TLSCert, settings.TLSKey,
		settings.RateLimit, settings.RateBurst, settings.RoleBackoff, settings.RoleMaxFailures, settings.Disable,
		settings.SweepInterval, settings.ReconcileInterval, settings.ShutdownTimeout, settings.TestClock, settings.Dev,
		settings.EnableKinds, settings.ExportDeliveryURL, settings.ProviderExport)
	f.Bind(consoleSettings...)
	f.Bind(digestSettings...)
	f.Bind(replicationBindings...)
	f.Bind(settings.LogLevel, settings.OTLPEndpoint)
	return f
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := serveFlags(stderr)
	if code, ok := f.Parse(args); !ok {
		return code
	}
	s, err := serveConfig(f)
	if err != nil {
		return fail(stderr, "serve", err)
	}
	log := newLogger(stderr, f)
	if err := serve(ctx, dbFrom(f), s, log); err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "serve", err)
	}
	return 0
}

// serveConfig reads serve's settings, each validated by the catalogue, and
// checks how they go together, naming every one at fault.
func serveConfig(f *settings.Flags) (serveSettings, error) {
	s := serveSettings{listen: f.Text(settings.Listen), providerURL: f.Text(settings.ProviderURL),
		tokensFile: f.Text(settings.TokensFile), signingKeyFile: f.Text(settings.SigningKeyFile),
		signingKeys: f.Text(settings.SigningKeys), tlsCert: f.Text(settings.TLSCert), tlsKey: f.Text(settings.TLSKey),
		dev: f.Bool(settings.Dev), testClock: f.Bool(settings.TestClock), disabled: map[string]bool{},
		sweepInterval: f.Duration(settings.SweepInterval), reconcileInterval: f.Duration(settings.ReconcileInterval),
		shutdownTimeout: f.Duration(settings.ShutdownTimeout), roleBackoff: f.Duration(settings.RoleBackoff),
		roleMaxFailures: f.Int(settings.RoleMaxFailures), tracing: tracingFrom(f, "opledger-serve"), replication: replicationFrom(f)}
	var errs []error
	var err error
	if s.profile, err = resolveProfile(f); err != nil {
		errs = append(errs, err)
	}
	if s.enabledKinds, err = parseEnabledKinds(f.Text(settings.EnableKinds)); err != nil {
		errs = append(errs, err)
	}
	s.exportURL = f.Text(settings.ExportDeliveryURL)
	s.providerExport = f.Text(settings.ProviderExport)
	if s.tokensFile == "" {
		errs = append(errs, fmt.Errorf("%s (lines 'ROLE sha256:DIGEST [NAME]', opledger tokens new)", f.Missing(settings.TokensFile, "tokens file")))
	}
	switch {
	case s.signingKeys != "" && s.signingKeyFile != "":
		errs = append(errs, fmt.Errorf("both %s and %s: give the key ring, or the one key, not both",
			f.Name(settings.SigningKeys), f.Name(settings.SigningKeyFile)))
	case s.signingKeys == "" && s.signingKeyFile == "" && !s.dev:
		errs = append(errs, fmt.Errorf("no signing key: set %s or --%s (a key ring: opledger keys new), or %s / --%s (one base64 Ed25519 seed), or run with --dev for an ephemeral one",
			settings.SigningKeys.Env, settings.SigningKeys.Flag, settings.SigningKeyFile.Env, settings.SigningKeyFile.Flag))
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		errs = append(errs, fmt.Errorf("TLS needs both %s (--%s) and %s (--%s)", settings.TLSCert.Env, settings.TLSCert.Flag, settings.TLSKey.Env, settings.TLSKey.Flag))
	}
	s.rateLimit = rateLimitConfig(f)
	for _, r := range strings.Split(f.Text(settings.Disable), ",") {
		if r = strings.TrimSpace(r); r != "" {
			s.disabled[strings.ToLower(r)] = true
		}
	}
	if !s.disabled["reconciler"] && s.providerURL == "" {
		errs = append(errs, fmt.Errorf("%s for the reconciler, or --disable reconciler", f.Missing(settings.ProviderURL, "provider")))
	}
	if s.brokers, err = kafkaBrokers(f); err != nil {
		errs = append(errs, err)
	}
	s.digests, err = digestsFrom(f)
	errs = append(errs, err)
	s.console, err = consoleFrom(f)
	errs = append(errs, err)
	return s, errors.Join(errs...)
}

// rateLimitConfig reads --rate-limit (0: off) and --rate-burst.
func rateLimitConfig(f *settings.Flags) httpapi.RateLimit {
	r := f.Float(settings.RateLimit)
	return httpapi.RateLimit{Off: r == 0, PerSecond: r, Burst: f.Int(settings.RateBurst)}
}

// serve runs until ctx ends or a role fails past its bound, then stops
// accepting requests, lets those in flight finish, and stops the roles (no
// lease or batch is started after). A role past its bound is serve's error.
func serve(ctx context.Context, db *dbConfig, s serveSettings, log *slog.Logger) error {
	hup, stopHangup := notifyHangup()
	defer stopHangup()

	var clk clock.Clock = clock.System{}
	var offset *clock.Offset
	if s.testClock {
		offset = clock.NewOffset(clock.System{})
		clk = offset
	}
	tokens, cert, keys, keysSrc, err := serveFiles(s, clk)
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
		return schemaError(db, err, projections.ErrSchemaOutdated)
	}
	if err := pgstate.CheckSchema(ctx, pool, db.transport); err != nil { // the relay's tables, and every role's set_aside
		return schemaError(db, err, pgstate.ErrSchemaOutdated)
	}
	repl, err := newReplicationWatch(s.replication, opened.Replication, log)
	if err != nil {
		return err
	}
	if repl != nil {
		if err := repl.start(ctx); err != nil {
			return err
		}
	}
	tp, stopTracing, err := startTracing(ctx, s.tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()

	metrics := httpapi.NewMetrics()
	regressions, err := newRegressions(store, "serve", clk, log, metrics)
	if err != nil {
		return err
	}
	lg, err := ledger.New(ledger.Config{Store: store, Clock: clk, Logger: log, Regressions: regressions.recorder})
	if err != nil {
		return err
	}
	failing, err := pgsetaside.New(pool, db.transport) // the roles' failing items, beside the transport's tables
	if err != nil {
		return err
	}
	built, roles, err := backgroundRoles(db, s, pool, store, lg, clk, failing, metrics, tp, log)
	if err != nil {
		return err
	}
	projector, relays := built.Projector, built.Relays
	lagReads, err := projections.NewReads(pool, db.viewSchema)
	if err != nil {
		return err
	}
	lags := &lagHistory{reads: lagReads, projector: projector.Lag, relays: relays, clock: clk, log: log} // serve_lag_history.go
	if digests, err := s.digests.role(store, metrics, regressions, log); err != nil {
		return err
	} else if digests.run != nil {
		roles = append(roles, digests)
	}
	sup := newSupervisor(superviseConfig{MinBackoff: s.roleBackoff, MaxFailures: s.roleMaxFailures, Logger: log}, serveRoles)
	status, err := serveStatus(sup, pool, relays, db.transport, s)
	if err != nil {
		return err
	}
	status.Replication = repl.statusFunc()
	api, err := httpapi.New(httpapi.Config{
		Ledger: lg, Signer: keys, Tokens: tokens, ReadModels: pool, Schema: db.viewSchema, Profile: s.profile,
		TestClock: offset, Metrics: metrics, Logger: log, ProjectionLag: projector.Lag, SetAside: failing,
		Ready: readiness(pool, opened.Check), Status: status, RateLimit: s.rateLimit, EnabledKinds: s.enabledKinds, Tracing: tp,
		Regressions: regressions.monitor,
	})
	if err != nil {
		return err
	}
	closeConsole, err := s.console.mount(api, consoleDeps{pool: pool, viewSchema: db.viewSchema, transportSchema: db.transport, brokers: s.brokers,
		ledger: lg, tokens: tokens, setAside: failing, projector: projector, roles: sup.statuses, relays: relays,
		replication: repl.statusFunc(), regressions: regressions.monitor, log: log})
	if err != nil {
		return err
	}
	defer closeConsole()
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return fmt.Errorf("OPLEDGER_LISTEN / --listen %s: %w", s.listen, err)
	}

	warnings(log, s, keys, tokens)
	rctx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRoles()
	sup.start(rctx, roles)
	go lags.run(rctx)
	replLost := make(chan error, 1)
	if repl != nil {
		go func() {
			if err := repl.run(rctx); err != nil {
				replLost <- err
			}
		}()
	}
	reload := &reloadable{tokens: tokens, keys: keys, keysSrc: keysSrc, cert: cert, metrics: metrics, log: log}
	go reload.onHangup(rctx, hup)
	go regressions.follow(rctx)

	srv, scheme, served := startHTTP(s.listen, ln, api, cert, log)
	log.Info("opledger serving", "listen", s.listen, "scheme", scheme, "read_models", db.viewSchema, "store", db.storeKind, "store_schema", db.storeSchema,
		"provider_profile", s.profile.Name, "transport", transportName(s.brokers), "roles", enabledRoles(s.disabled),
		"signing_key", keys.KeyID(), "signing_keys", keyStates(keys.Status()), "rate_limit", rateLimitText(s.rateLimit),
		"console", s.console.enabled)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-served:
	case runErr = <-sup.failures():
	case runErr = <-replLost:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: requests still in flight were cut off", "err", err)
	}
	stopRoles()
	sup.wait()
	log.Info("opledger stopped")
	if errors.Is(runErr, http.ErrServerClosed) {
		return nil
	}
	return runErr
}

// serveFiles loads every file serve reads first, so that a bad one stops
// serve before anything is said about the others (the --dev warning
// included): the tokens, the TLS certificate (nil without one) and the
// signing keys with the source SIGHUP reloads.
func serveFiles(s serveSettings, clk clock.Clock) (*httpapi.Tokens, *httpapi.Certificate, *captoken.Keys, string, error) {
	tokens, err := httpapi.LoadTokens(s.tokensFile)
	if err != nil {
		return nil, nil, nil, "", err
	}
	var cert *httpapi.Certificate
	if s.tlsCert != "" {
		if cert, err = httpapi.LoadCertificate(s.tlsCert, s.tlsKey); err != nil {
			return nil, nil, nil, "", err
		}
	}
	keys, keysSrc, err := servingKeys(s, clk)
	if err != nil {
		return nil, nil, nil, "", err
	}
	return tokens, cert, keys, keysSrc, nil
}

// startHTTP serves api on ln (TLS with cert, when given) and returns the
// server, its scheme, and where its end is reported.
func startHTTP(listen string, ln net.Listener, api http.Handler, cert *httpapi.Certificate, log *slog.Logger) (*http.Server, string, <-chan error) {
	srv := httpapi.NewHTTPServer(listen, api, log)
	served := make(chan error, 1)
	if cert == nil {
		go func() { served <- srv.Serve(ln) }()
		return srv, "http", served
	}
	srv.TLSConfig = cert.TLSConfig()
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	return srv, "https", served
}

// servingKeys opens the key ring, or the one-key file, or with --dev and
// neither given makes an ephemeral key (warnings says so, loudly). It
// returns the source SIGHUP reloads ("" for the ephemeral key).
func servingKeys(s serveSettings, clk clock.Clock) (*captoken.Keys, string, error) {
	switch {
	case s.signingKeys != "":
		keys, err := captoken.OpenKeys(s.signingKeys, 0, clk)
		return keys, s.signingKeys, err
	case s.signingKeyFile != "":
		keys, err := captoken.OpenSingleKey(s.signingKeyFile, clk)
		return keys, s.signingKeyFile, err
	}
	signer, err := captoken.NewEphemeral()
	if err != nil {
		return nil, "", err
	}
	return captoken.NewKeys(captoken.SingleKeyRing(signer, "ephemeral"), clk, nil), "", nil
}

// warnings says, once everything serve was given has loaded, what must
// never reach production: the test clock, --dev's ephemeral key, plain
// tokens.
func warnings(log *slog.Logger, s serveSettings, keys *captoken.Keys, tokens *httpapi.Tokens) {
	if s.testClock {
		log.Warn("TEST CLOCK ENABLED: POST /v1/test-clock moves the ledger's time; never run this in production")
	}
	if s.signingKeys == "" && s.signingKeyFile == "" {
		log.Warn("DEV MODE: capability tokens are signed with an EPHEMERAL key; they become invalid when this process exits. Never run --dev in production.",
			"signing_key", keys.KeyID())
	}
	warnPlainTokens(log, tokens)
}

// schemaError adds to a failed schema check what to run when the schema is
// outdated (sentinel); any other failure is returned as it is.
func schemaError(db *dbConfig, err, sentinel error) error {
	if errors.Is(err, sentinel) {
		return db.outdated(err)
	}
	return err
}

func rateLimitText(r httpapi.RateLimit) string {
	if r.Off {
		return "off"
	}
	return fmt.Sprintf("%g/s per token, bursts of %d", r.PerSecond, r.Burst)
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
