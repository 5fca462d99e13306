package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/adapters/pgqueue"
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
}

// serveFlags is serve's settings as given, before validation.
type serveFlags struct {
	listen, providerURL, tokens, signingKey, signingKeys             *string
	provider                                                         *providerFlags // provider_config.go
	tlsCert, tlsKey, rateLimit, rateBurst, roleBackoff, roleFailures *string
	dev, testClock                                                   *bool
	disable, sweepEvery, reconcileEvery                              *string
	enableKinds, exportURL                                           *string
	shutdown                                                         *time.Duration
}

func addServeFlags(fs *flag.FlagSet) serveFlags {
	return serveFlags{
		listen:      fs.String("listen", env("OPLEDGER_LISTEN", "127.0.0.1:8080"), "address of the HTTP API [OPLEDGER_LISTEN]"),
		providerURL: fs.String("provider-url", env("PROVIDER_URL", ""), "the payment provider's base URL, for the reconciler [PROVIDER_URL]"),
		provider:    addProviderFlags(fs),
		tokens: fs.String(httpapi.TokensFlag, env(httpapi.TokensEnvVar, ""),
			"bearer tokens per role: lines 'ROLE sha256:DIGEST [NAME]' (opledger tokens hash); reloaded on SIGHUP ["+httpapi.TokensEnvVar+"]"),
		signingKeys: fs.String(captoken.RingFlag, env(captoken.RingEnvVar, ""),
			"the key ring signing capability tokens: a directory of *.key files or one file (opledger keys); reloaded on SIGHUP ["+captoken.RingEnvVar+"]"),
		signingKey: fs.String(captoken.Flag, env(captoken.EnvVar, ""),
			"instead of --"+captoken.RingFlag+": one file holding a base64 Ed25519 seed, a ring of one key that never rotates ["+captoken.EnvVar+"]"),
		tlsCert:      fs.String(httpapi.TLSCertFlag, env(httpapi.TLSCertEnvVar, ""), "serve HTTPS with this PEM certificate chain (with --tls-key); reloaded on SIGHUP ["+httpapi.TLSCertEnvVar+"]"),
		tlsKey:       fs.String(httpapi.TLSKeyFlag, env(httpapi.TLSKeyEnvVar, ""), "the PEM private key of --tls-cert ["+httpapi.TLSKeyEnvVar+"]"),
		rateLimit:    fs.String("rate-limit", env("OPLEDGER_RATE_LIMIT", strconv.Itoa(httpapi.DefaultRatePerSecond)), "requests per second each bearer token may send; 0 turns the limit off [OPLEDGER_RATE_LIMIT]"),
		rateBurst:    fs.String("rate-burst", env("OPLEDGER_RATE_BURST", strconv.Itoa(httpapi.DefaultRateBurst)), "requests a token may send at once [OPLEDGER_RATE_BURST]"),
		roleBackoff:  fs.String("role-backoff", env("OPLEDGER_ROLE_BACKOFF", defaultRoleMinBackoff.String()), "first pause before restarting a role that stopped; doubles up to 30s [OPLEDGER_ROLE_BACKOFF]"),
		roleFailures: fs.String("role-max-failures", env("OPLEDGER_ROLE_MAX_FAILURES", strconv.Itoa(defaultRoleMaxFailures)), "failures in a row after which a role is not restarted and serve exits 1 [OPLEDGER_ROLE_MAX_FAILURES]"),
		dev:          fs.Bool("dev", false, "development mode: an ephemeral signing key when none is given (tokens die with the process)"),
		testClock:    fs.Bool("test-clock", false, "enable POST /v1/test-clock to move the ledger's clock forward (never in production)"),
		disable:      fs.String("disable", env("OPLEDGER_DISABLE", ""), "background roles not to run here, comma-separated: "+strings.Join(serveRoles, ",")+" [OPLEDGER_DISABLE]"),
		sweepEvery:   fs.String("sweep-interval", env("OPLEDGER_SWEEP_INTERVAL", "2s"), "how often the sweeper looks for lapsed leases [OPLEDGER_SWEEP_INTERVAL]"),
		reconcileEvery: fs.String("reconcile-interval", env("OPLEDGER_RECONCILE_INTERVAL", "3s"),
			"how often the reconciler examines Unknown executions [OPLEDGER_RECONCILE_INTERVAL]"),
		shutdown: fs.Duration("shutdown-timeout", 15*time.Second, "how long requests and roles in flight may take to finish on shutdown"),
		enableKinds: fs.String("enable-kinds", env("OPLEDGER_ENABLE_KINDS", ""),
			"operation kinds besides refunds the API creates, comma-separated: export-download. Enable one only once every reader of the ledger (serve, worker, audit, projections) runs this release [OPLEDGER_ENABLE_KINDS]"),
		exportURL: addExportDeliveryFlag(fs),
	}
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("serve", "[flags]", stderr)
	db := dbFlags(fs)
	tf := addTransportFlags(fs)
	f := addServeFlags(fs)
	digests := addDigestFlags(fs)
	cons := addConsoleFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	s, err := serveConfig(f, tf)
	s.digests, err = digests, errors.Join(err, digests.validate())
	s.console, err = cons, errors.Join(err, cons.validate())
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
func serveConfig(f serveFlags, tf *transportFlags) (serveSettings, error) {
	s := serveSettings{listen: *f.listen, providerURL: *f.providerURL, tokensFile: *f.tokens, signingKeyFile: *f.signingKey,
		signingKeys: *f.signingKeys, tlsCert: *f.tlsCert, tlsKey: *f.tlsKey,
		dev: *f.dev, testClock: *f.testClock, disabled: map[string]bool{}, shutdownTimeout: *f.shutdown}
	var errs []error
	var err error
	if s.sweepInterval, err = time.ParseDuration(*f.sweepEvery); err != nil || s.sweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("OPLEDGER_SWEEP_INTERVAL / --sweep-interval %q: want a positive duration like 2s", *f.sweepEvery))
	}
	if s.reconcileInterval, err = time.ParseDuration(*f.reconcileEvery); err != nil || s.reconcileInterval <= 0 {
		errs = append(errs, fmt.Errorf("OPLEDGER_RECONCILE_INTERVAL / --reconcile-interval %q: want a positive duration like 3s", *f.reconcileEvery))
	}
	if s.listen == "" {
		errs = append(errs, errors.New("OPLEDGER_LISTEN / --listen is empty"))
	}
	if s.profile, err = f.provider.resolve(); err != nil {
		errs = append(errs, err)
	}
	if s.enabledKinds, err = parseEnabledKinds(*f.enableKinds); err != nil {
		errs = append(errs, err)
	}
	s.exportURL = *f.exportURL
	if s.tokensFile == "" {
		errs = append(errs, fmt.Errorf("no tokens file: set %s or --%s (lines 'ROLE sha256:DIGEST [NAME]')", httpapi.TokensEnvVar, httpapi.TokensFlag))
	}
	switch {
	case s.signingKeys != "" && s.signingKeyFile != "":
		errs = append(errs, fmt.Errorf("both %s (--%s) and %s (--%s): give the key ring, or the one key, not both",
			captoken.RingEnvVar, captoken.RingFlag, captoken.EnvVar, captoken.Flag))
	case s.signingKeys == "" && s.signingKeyFile == "" && !s.dev:
		errs = append(errs, fmt.Errorf("no signing key: set %s or --%s (a key ring: opledger keys new), or %s / --%s (one base64 Ed25519 seed), or run with --dev for an ephemeral one",
			captoken.RingEnvVar, captoken.RingFlag, captoken.EnvVar, captoken.Flag))
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		errs = append(errs, fmt.Errorf("TLS needs both %s (--%s) and %s (--%s)", httpapi.TLSCertEnvVar, httpapi.TLSCertFlag, httpapi.TLSKeyEnvVar, httpapi.TLSKeyFlag))
	}
	if s.rateLimit, err = rateLimitConfig(*f.rateLimit, *f.rateBurst); err != nil {
		errs = append(errs, err)
	}
	if s.roleBackoff, err = time.ParseDuration(*f.roleBackoff); err != nil || s.roleBackoff <= 0 || s.roleBackoff > defaultRoleMaxBackoff {
		errs = append(errs, fmt.Errorf("OPLEDGER_ROLE_BACKOFF / --role-backoff %q: want a duration in (0, %s]", *f.roleBackoff, defaultRoleMaxBackoff))
	}
	if s.roleMaxFailures, err = strconv.Atoi(*f.roleFailures); err != nil || s.roleMaxFailures < 1 || s.roleMaxFailures > 1000 {
		errs = append(errs, fmt.Errorf("OPLEDGER_ROLE_MAX_FAILURES / --role-max-failures %q: want a whole number in [1, 1000]", *f.roleFailures))
	}
	for _, r := range strings.Split(*f.disable, ",") {
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
	if !s.disabled["reconciler"] && s.providerURL == "" {
		errs = append(errs, errors.New("no provider for the reconciler: set PROVIDER_URL or --provider-url, or --disable reconciler"))
	}
	if s.shutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if s.brokers, err = tf.kafkaBrokers(); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// rateLimitConfig reads --rate-limit (0: off) and --rate-burst.
func rateLimitConfig(rate, burst string) (httpapi.RateLimit, error) {
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || r < 0 || r > 1e6 {
		return httpapi.RateLimit{}, fmt.Errorf("OPLEDGER_RATE_LIMIT / --rate-limit %q: want requests per second in [0, 1e6] (0: no limit)", rate)
	}
	b, err := strconv.Atoi(burst)
	if err != nil || b < 1 || b > 1e6 {
		return httpapi.RateLimit{}, fmt.Errorf("OPLEDGER_RATE_BURST / --rate-burst %q: want a whole number in [1, 1000000]", burst)
	}
	return httpapi.RateLimit{Off: r == 0, PerSecond: r, Burst: b}, nil
}

// serve runs until ctx ends or a role fails past its bound, then stops
// accepting requests, lets those in flight finish, and stops the roles (no
// lease or batch is started after). A role past its bound is serve's error.
func serve(ctx context.Context, db *dbConfig, tf *transportFlags, s serveSettings, log *slog.Logger) error {
	hup, stopHangup := notifyHangup()
	defer stopHangup()

	var clk clock.Clock = clock.System{}
	var offset *clock.Offset
	if s.testClock {
		offset = clock.NewOffset(clock.System{})
		clk = offset
		log.Warn("TEST CLOCK ENABLED: POST /v1/test-clock moves the ledger's time; never run this in production")
	}
	keys, keysSrc, err := servingKeys(s, clk, log)
	if err != nil {
		return err
	}
	tokens, err := httpapi.LoadTokens(s.tokensFile)
	if err != nil {
		return err
	}
	warnPlainTokens(log, tokens)
	var cert *httpapi.Certificate
	if s.tlsCert != "" {
		if cert, err = httpapi.LoadCertificate(s.tlsCert, s.tlsKey); err != nil {
			return err
		}
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
	roles, relays, err := backgroundRoles(db, tf, s, pool, store, lg, projector, metrics, log)
	if err != nil {
		return err
	}
	if digests, err := s.digests.role(store, log); err != nil {
		return err
	} else if digests.run != nil {
		roles = append(roles, digests)
	}
	sup := newSupervisor(superviseConfig{MinBackoff: s.roleBackoff, MaxFailures: s.roleMaxFailures, Logger: log}, serveRoles)
	status, err := serveStatus(sup, pool, relays, tf, s)
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{
		Ledger: lg, Signer: keys, Tokens: tokens, ReadModels: pool, Schema: db.viewSchema, Profile: s.profile,
		TestClock: offset, Metrics: metrics, Logger: log, ProjectionLag: projector.Lag, SetAside: failing,
		Ready: readiness(pool, opened.Check), Status: status, RateLimit: s.rateLimit, EnabledKinds: s.enabledKinds,
	})
	if err != nil {
		return err
	}
	closeConsole, err := s.console.mount(api, consoleDeps{pool: pool, viewSchema: db.viewSchema, transportSchema: tf.schema, brokers: s.brokers,
		ledger: lg, tokens: tokens, setAside: failing, projector: projector, roles: sup.statuses, relays: relays, log: log})
	if err != nil {
		return err
	}
	defer closeConsole()
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return fmt.Errorf("OPLEDGER_LISTEN / --listen %s: %w", s.listen, err)
	}

	rctx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRoles()
	sup.start(rctx, roles)
	reload := &reloadable{tokens: tokens, keys: keys, keysSrc: keysSrc, cert: cert, metrics: metrics, log: log}
	go reload.onHangup(rctx, hup)

	srv := httpapi.NewHTTPServer(s.listen, api, log)
	served := make(chan error, 1)
	scheme := "http"
	if cert != nil {
		scheme = "https"
		srv.TLSConfig = cert.TLSConfig()
		go func() { served <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	log.Info("opledger serving", "listen", s.listen, "scheme", scheme, "read_models", db.viewSchema, "store", db.storeKind, "store_schema", db.storeSchema,
		"provider_profile", s.profile.Name, "transport", transportName(s.brokers), "roles", enabledRoles(s.disabled),
		"signing_key", keys.KeyID(), "signing_keys", keyStates(keys.Status()), "rate_limit", rateLimitText(s.rateLimit),
		"console", s.console.enabled)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-served:
	case runErr = <-sup.failures():
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

// servingKeys opens the key ring, or the one-key file, or with --dev and
// neither given makes an ephemeral key, loudly. It returns the source
// SIGHUP reloads ("" for the ephemeral key).
func servingKeys(s serveSettings, clk clock.Clock, log *slog.Logger) (*captoken.Keys, string, error) {
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
	log.Warn("DEV MODE: capability tokens are signed with an EPHEMERAL key; they become invalid when this process exits. Never run --dev in production.",
		"signing_key", signer.KeyID())
	return captoken.NewKeys(captoken.SingleKeyRing(signer, "ephemeral"), clk, nil), "", nil
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
