package settings

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"opledger/adapters/captoken"
	"opledger/adapters/console"
	"opledger/adapters/httpapi"
	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/provider"
	"opledger/adapters/roles"
	"opledger/adapters/transport/pgstate"
	"opledger/domain"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/postgres"
	"opledger/projections"
)

// DefaultDatabaseURL is where a command looks for PostgreSQL when neither
// DATABASE_URL nor --database-url says otherwise.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServeRoles are the background roles serve runs beside the API; each can
// be switched off (--disable) to run it elsewhere.
var ServeRoles = []string{roles.Projector, roles.Sweeper, roles.Reconciler, roles.Relay}

// LogLevels are the levels OPLEDGER_LOG_LEVEL accepts.
var LogLevels = []string{"debug", "info", "warn", "error"}

// The catalogue: every shared setting of every command, defined once. The
// order is the README table's.
var (
	// Where the data is.

	DatabaseURL = &Setting{Flag: "database-url", Env: "DATABASE_URL", Default: DefaultDatabaseURL, Arg: "URL",
		Help:  "PostgreSQL connection URL; never printed with its password",
		Check: nonEmpty("a postgres:// URL"), Redact: postgres.RedactURL}
	Store = &Setting{Flag: "store", Env: "OPLEDGER_STORE", Default: "postgres", Arg: "postgres|kurrent",
		Help:  "event store backend: postgres, or kurrent (KurrentDB at KURRENTDB_URL; the read models stay in PostgreSQL)",
		Check: oneOf("postgres", "kurrent")}
	KurrentURL = &Setting{Flag: "kurrentdb-url", Env: "KURRENTDB_URL", Arg: "URL",
		Help: "KurrentDB connection string for --store kurrent, e.g. esdb://127.0.0.1:2113?tls=false", Redact: kurrent.RedactURL}
	StoreSchema = &Setting{Flag: "store-schema", Env: "OPLEDGER_STORE_SCHEMA", Default: postgres.DefaultSchema, Arg: "NAME",
		Help: "schema of the PostgreSQL event store", Check: nonEmpty("a schema name")}
	ReadModelSchema = &Setting{Flag: "schema", FlagIn: map[string]string{"projections rebuild": "live-schema"},
		Env: "OPLEDGER_SCHEMA", Default: projections.DefaultSchema, Arg: "NAME",
		Help: "schema of the read models analysts query", Check: nonEmpty("a schema name")}
	TransportSchema = &Setting{Flag: "transport-schema", Env: "OPLEDGER_TRANSPORT_SCHEMA", Default: pgstate.DefaultSchema, Arg: "NAME",
		Help:  "schema of the transport tables: relay checkpoints, the Postgres queue, resubmissions, the loops' set-aside items, the console's sessions",
		Check: nonEmpty("a schema name")}

	// The transport.

	KafkaBrokers = &Setting{Flag: "kafka-brokers", Env: "KAFKA_BROKERS", Arg: "HOST:PORT,...",
		Help: "Kafka brokers; empty: the Postgres-only transport",
		Check: optional(func(s string) error {
			_, err := kafka.ParseBrokers(s)
			return err
		})}
	KafkaGroup = &Setting{Flag: "kafka-group", Env: "KAFKA_GROUP_ID", Default: "opledger-workers", Arg: "NAME",
		Help: "the workers' Kafka consumer group", Check: nonEmpty("a consumer group name")}
	KafkaSessionTimeout = &Setting{Flag: "kafka-session-timeout", Env: "OPLEDGER_KAFKA_SESSION_TIMEOUT", Default: fmtDuration(kafka.DefaultSessionTimeout), Arg: "DURATION",
		Help:  "how long the group waits for a silent worker before its partitions move to the others (the broker's group.min.session.timeout.ms bounds it, 6s by default)",
		Check: durationIn(time.Second, 30*time.Minute, "6s")}
	KafkaHeartbeatInterval = &Setting{Flag: "kafka-heartbeat-interval", Env: "OPLEDGER_KAFKA_HEARTBEAT_INTERVAL", Default: fmtDuration(kafka.DefaultHeartbeatInterval), Arg: "DURATION",
		Help:  "how often a worker tells the group it lives and learns of a rebalance; at most a third of the session timeout",
		Check: durationIn(10*time.Millisecond, 10*time.Minute, "1s")}
	KafkaRebalanceTimeout = &Setting{Flag: "kafka-rebalance-timeout", Env: "OPLEDGER_KAFKA_REBALANCE_TIMEOUT", Default: fmtDuration(kafka.DefaultRebalanceTimeout), Arg: "DURATION",
		Help:  "how long a rebalance waits for every worker to rejoin before it goes on without the late ones",
		Check: durationIn(100*time.Millisecond, 30*time.Minute, "10s")}

	// The provider.

	ProviderURL = &Setting{Flag: "provider-url", Env: "PROVIDER_URL", Arg: "URL",
		Help: "the payment provider's base URL (the workers' and the reconciler's), e.g. http://127.0.0.1:8081"}
	ProviderProfile = &Setting{Flag: "provider-profile", FlagIn: map[string]string{"provider-sim": "provider", "audit provider-diff": "provider"},
		Env: "PROVIDER_PROFILE", DefaultDoc: provider.StripeV1.Name, Arg: "NAME",
		Help: "the provider's built-in profile: " + strings.Join(provider.BuiltinProfileNames(), ", ") + " (docs/providers.md)"}
	ProviderProfileFile = &Setting{Flag: "provider-profile-file", Env: "PROVIDER_PROFILE_FILE", Arg: "FILE",
		Help: "a provider profile file (strict JSON, docs/providers.md) instead of a built-in profile; not with PROVIDER_PROFILE"}

	// serve.

	Listen = &Setting{Flag: "listen", Env: "OPLEDGER_LISTEN", Default: "127.0.0.1:8080", Arg: "ADDR",
		Help: "serve's address", Check: nonEmpty("host:port")}
	TokensFile = &Setting{Flag: httpapi.TokensFlag, Env: httpapi.TokensEnvVar, Arg: "FILE",
		Help: "bearer tokens per role: lines 'ROLE sha256:DIGEST [NAME]' (opledger tokens); reloaded on SIGHUP"}
	SigningKeys = &Setting{Flag: captoken.RingFlag, Env: captoken.RingEnvVar, Arg: "DIR|FILE",
		Help: "the key ring signing capability tokens: a directory of *.key files or one file (opledger keys); reloaded on SIGHUP"}
	SigningKeyFile = &Setting{Flag: captoken.Flag, Env: captoken.EnvVar, Arg: "FILE",
		Help: "instead of a ring: one base64 Ed25519 seed, a ring of one key that never rotates"}
	TLSCert = &Setting{Flag: httpapi.TLSCertFlag, Env: httpapi.TLSCertEnvVar, Arg: "FILE",
		Help: "serve HTTPS with this PEM certificate chain (with --tls-key); reloaded on SIGHUP"}
	TLSKey = &Setting{Flag: httpapi.TLSKeyFlag, Env: httpapi.TLSKeyEnvVar, Arg: "FILE",
		Help: "the PEM private key of --tls-cert; reloaded on SIGHUP"}
	RateLimit = &Setting{Flag: "rate-limit", Env: "OPLEDGER_RATE_LIMIT", Default: strconv.Itoa(httpapi.DefaultRatePerSecond), Arg: "N",
		Help: "requests per second each bearer token may send; 0 turns the limit off", Check: floatIn(0, 1e6, " (0: no limit)")}
	RateBurst = &Setting{Flag: "rate-burst", Env: "OPLEDGER_RATE_BURST", Default: strconv.Itoa(httpapi.DefaultRateBurst), Arg: "N",
		Help: "requests a token may send at once", Check: intIn(1, 1_000_000)}
	RoleBackoff = &Setting{Flag: "role-backoff", Env: "OPLEDGER_ROLE_BACKOFF", Default: "1s", Arg: "DURATION",
		Help: "first pause before restarting a background role that stopped; doubles up to 30s", Check: durationIn(time.Nanosecond, 30*time.Second, "1s")}
	RoleMaxFailures = &Setting{Flag: "role-max-failures", Env: "OPLEDGER_ROLE_MAX_FAILURES", Default: "5", Arg: "N",
		Help: "failures in a row after which a role is not restarted and serve exits 1", Check: intIn(1, 1000)}
	Disable = &Setting{Flag: "disable", Env: "OPLEDGER_DISABLE", Arg: "ROLES",
		Help: "background roles not to run here, comma-separated: " + strings.Join(ServeRoles, ","), Check: listOf(ServeRoles)}
	Console = &Setting{Flag: "console", Env: "OPLEDGER_CONSOLE", Default: "on", Arg: "on|off",
		Help: "serve the web console at /ui/ (docs/ui.md)", Check: oneOf("on", "off", "true", "false", "1", "0", "yes", "no")}
	ConsoleKey = &Setting{Flag: "console-key", Env: "OPLEDGER_CONSOLE_KEY_FILE", Arg: "FILE",
		Help: "the console's session key (base64, at least 32 random bytes), the same on every instance behind one address; default a key per process"}
	ConsoleSecureCookies = &Setting{Flag: "console-secure-cookies", Env: "OPLEDGER_CONSOLE_SECURE_COOKIES", Bool: true,
		Help: "mark the console's cookies Secure on plain HTTP too, behind a proxy that terminates TLS (over --tls-cert they are anyway)"}
	ConsoleSessionTTL = &Setting{Flag: "console-session-ttl", Env: "OPLEDGER_CONSOLE_SESSION_TTL", Default: fmtDuration(console.DefaultSessionTTL), Arg: "DURATION",
		Help: "how long a sign-in to the console lasts", Check: durationIn(time.Minute, console.MaxSessionTTL, "8h")}
	SweepInterval = &Setting{Flag: "sweep-interval", Env: "OPLEDGER_SWEEP_INTERVAL", Default: "2s", Arg: "DURATION",
		Help: "how often the sweeper looks for lapsed leases", Check: durationIn(time.Nanosecond, 0, "2s")}
	ReconcileInterval = &Setting{Flag: "reconcile-interval", Env: "OPLEDGER_RECONCILE_INTERVAL", Default: "3s", Arg: "DURATION",
		Help: "how often the reconciler examines Unknown executions", Check: durationIn(time.Nanosecond, 0, "3s")}
	ShutdownTimeout = &Setting{Flag: "shutdown-timeout", Env: "OPLEDGER_SHUTDOWN_TIMEOUT", Default: "15s", Arg: "DURATION",
		Help: "how long requests and roles in flight (serve), messages in flight and their recording (worker) may take to finish on shutdown", Check: durationIn(time.Nanosecond, 0, "15s")}
	EnableKinds = &Setting{Flag: "enable-kinds", Env: "OPLEDGER_ENABLE_KINDS", Arg: "KINDS",
		Help: "operation kinds besides refunds the API creates, comma-separated: export-download; enable one only once every reader of the ledger (serve, worker, audit, projections) runs this release",
		Check: func(s string) error {
			for _, name := range strings.Split(s, ",") {
				if name = strings.TrimSpace(name); name != "" {
					if _, err := domain.ParseOperationKind(name); err != nil {
						return err
					}
				}
			}
			return nil
		}}
	ExportDeliveryURL = &Setting{Flag: "export-delivery-url", Env: "EXPORT_DELIVERY_URL", Arg: "URL",
		Help: "the export-delivery service's base URL, for export downloads (provider-sim serves one beside the provider); empty: none"}
	ProviderExport = &Setting{Flag: "provider-export", Env: "OPLEDGER_PROVIDER_EXPORT", Arg: "URL|FILE", DefaultDoc: "none",
		Help: "the provider's export as audit provider-diff reads it (an http(s) URL, e.g. provider-sim's /_sim/ledger/export, or a file a job refreshes; at most 64 MiB): serve's reconciler checks its refunds against the ledger every 5 minutes and after a log regression, and escalates those the ledger lost"}
	// TestClock and Dev are flags only: neither may be switched on by an
	// environment left over from a test.
	TestClock = &Setting{Flag: "test-clock", Bool: true,
		Help: "enable POST /v1/test-clock to move the ledger's clock forward (never in production)"}
	Dev = &Setting{Flag: "dev", Bool: true,
		Help: "development mode: an ephemeral signing key when none is given (its tokens die with the process)"}

	// The worker.

	WorkerID = &Setting{Flag: "worker-id", Env: "OPLEDGER_WORKER_ID", DefaultFunc: defaultWorkerID, DefaultDoc: "<host>-<pid>", Arg: "ID",
		Help: "names this worker on leases, claims and dead letters", Check: checkWorkerID}
	WorkerConcurrency = &Setting{Flag: "concurrency", Env: "OPLEDGER_WORKER_CONCURRENCY", Default: strconv.Itoa(pgqueue.DefaultConcurrency), Arg: "N",
		Help: "messages handled at once on the Postgres queue (Kafka: one per assigned partition)", Check: intIn(1, pgqueue.MaxConcurrency)}
	WorkerRelay = &Setting{Flag: "relay", Env: "OPLEDGER_WORKER_RELAY", Bool: true,
		Help: "also run the relays (log to transport), for a single machine without serve"}

	// provider-sim.

	ProviderSimListen = &Setting{Flag: "listen", Env: "PROVIDER_SIM_LISTEN", Default: "127.0.0.1:8081", Arg: "ADDR",
		Help: "where provider-sim listens", Check: nonEmpty("host:port")}

	// Replication (docs/operations.md, High availability).

	RequireSyncReplication = &Setting{Flag: "require-sync-replication", Env: "OPLEDGER_REQUIRE_SYNC_REPLICATION", Bool: true,
		Help: "refuse to run unless the event store's writes are synchronously replicated (a synchronous standby); off: say so loudly and run"}
	ReplicationCheckInterval = &Setting{Flag: "replication-check-interval", Env: "OPLEDGER_REPLICATION_CHECK_INTERVAL", Default: "10s", Arg: "DURATION",
		Help: "how often serve and the worker ask the database whether their writes are synchronously replicated", Check: durationIn(100*time.Millisecond, time.Hour, "10s")}

	// Audit digests.

	DigestKey = &Setting{Flag: "digest-key", Env: "OPLEDGER_DIGEST_KEY_FILE", Arg: "FILE",
		Help: "file holding the base64 Ed25519 seed that signs audit digests (never the capability key)"}
	DigestPublicKey = &Setting{Flag: "public-key", Env: "OPLEDGER_DIGEST_PUBLIC_KEY_FILE", Arg: "FILE",
		Help: "the digest key's public key (the .pub file), to check digests' signatures"}
	DigestEvery = &Setting{Flag: "digest-every", Env: "OPLEDGER_DIGEST_EVERY", Arg: "DURATION", DefaultDoc: "never",
		Help: "serve signs a digest of the log this often into --digest-dir, e.g. 1h", Check: optional(durationIn(time.Second, 0, "1h"))}
	DigestDir = &Setting{Flag: "digest-dir", Env: "OPLEDGER_DIGEST_DIR", Arg: "DIR",
		Help: "the directory serve writes scheduled digests to"}

	// opledger doctor.

	DoctorCheckTimeout = &Setting{Flag: "check-timeout", Env: "OPLEDGER_DOCTOR_CHECK_TIMEOUT", Default: "5s", Arg: "DURATION",
		Help:  "opledger doctor: how long each check may take (a query, a dial, an HTTP request) before it fails",
		Check: durationIn(100*time.Millisecond, time.Minute, "5s")}

	// Operators.

	Operator = &Setting{Flag: "operator", Env: "OPLEDGER_OPERATOR", DefaultFunc: func() string { return os.Getenv("USER") }, DefaultDoc: "$USER", Arg: "NAME",
		Help: "who resubmits dead letters, recorded with each resubmission"}
	OperatorToken = &Setting{Flag: "token-file", Env: "OPLEDGER_TOKEN_FILE", Arg: "FILE",
		Help: "a file holding an operator's bearer token, authenticated against the tokens file (opledger regressions ack)"}

	// The deterministic simulator (opledger sim, docs/simulation.md).

	SimSeed = &Setting{Flag: "seed", Env: "OPLEDGER_SIM_SEED", Arg: "S", DefaultDoc: "random, printed",
		Help: "seed of sim's sweep (a schedule's seed, for --replay, is in its spec)"}
	SimStore = &Setting{Flag: "store", Env: "OPLEDGER_SIM_STORE", Default: "memory", Arg: "memory|postgres",
		Help: "event store of each sim schedule: memory, or postgres (a fresh schema per schedule at DATABASE_URL)", Check: oneOf("memory", "postgres")}

	// Logs and traces.

	LogLevel = &Setting{Flag: "log-level", Env: "OPLEDGER_LOG_LEVEL", Default: "info", Arg: "LEVEL",
		Help: "debug, info, warn or error (JSON logs on stderr)", Check: oneOf(LogLevels...)}
	OTLPEndpoint = &Setting{Flag: "otlp-endpoint", Env: "OTEL_EXPORTER_OTLP_ENDPOINT", Arg: "URL", DefaultDoc: "off",
		Help:  "export OpenTelemetry traces over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 (the other OTEL_* variables apply); empty: no traces leave the process",
		Check: optional(checkHTTPURL)}
)

// All is the catalogue in the README table's order.
var All = []*Setting{
	DatabaseURL, Store, KurrentURL, StoreSchema, ReadModelSchema, TransportSchema,
	KafkaBrokers, KafkaGroup, KafkaSessionTimeout, KafkaHeartbeatInterval, KafkaRebalanceTimeout,
	ProviderURL, ProviderProfile, ProviderProfileFile,
	Listen, TokensFile, SigningKeys, SigningKeyFile, TLSCert, TLSKey, RateLimit, RateBurst,
	RoleBackoff, RoleMaxFailures, Disable, Console, ConsoleKey, ConsoleSecureCookies, ConsoleSessionTTL,
	SweepInterval, ReconcileInterval, ShutdownTimeout, EnableKinds, ExportDeliveryURL, ProviderExport, TestClock, Dev,
	WorkerID, WorkerConcurrency, WorkerRelay,
	RequireSyncReplication, ReplicationCheckInterval,
	ProviderSimListen,
	DigestKey, DigestPublicKey, DigestEvery, DigestDir,
	DoctorCheckTimeout,
	Operator, OperatorToken,
	SimSeed, SimStore,
	LogLevel, OTLPEndpoint,
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

func checkWorkerID(id string) error {
	if id == "" || len(id) > domain.MaxIDLength {
		return fmt.Errorf("want 1 to %d printable characters", domain.MaxIDLength)
	}
	for _, r := range id {
		if r <= ' ' || r >= 0x7f {
			return fmt.Errorf("contains %q: want printable ASCII without spaces", r)
		}
	}
	return nil
}

func checkHTTPURL(s string) error {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return fmt.Errorf("want an http:// or https:// URL")
	}
	return nil
}
