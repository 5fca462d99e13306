package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"opledger/adapters/httpapi"
	"opledger/cmd/opledger/internal/settings"
)

// composeFile is what TestDockerCompose reads of docker-compose.yml.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Configs  map[string]struct {
		Content string `yaml:"content"`
	} `yaml:"configs"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       *composeBuild     `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   map[string]any    `yaml:"depends_on"`
}

type composeBuild struct {
	Dockerfile string `yaml:"dockerfile_inline"`
}

var (
	pinnedTag   = regexp.MustCompile(`^[^:@\s]+(:[0-9][0-9A-Za-z.+_-]*|:[A-Za-z0-9._-]*[0-9][A-Za-z0-9._-]*)?(@sha256:[0-9a-f]{64})?$`)
	fromLine    = regexp.MustCompile(`(?m)^FROM\s+(\S+)`)
	envVariable = regexp.MustCompile(`^(OPLEDGER_|DATABASE_URL$|KAFKA_|PROVIDER_|KURRENTDB_URL$|OTEL_)`)
)

// pinned reports whether an image reference names a version: a tag with a
// digit (not latest) or a digest; "scratch" is no image.
func pinned(ref string) bool {
	if ref == "scratch" {
		return true
	}
	m := pinnedTag.FindStringSubmatch(ref)
	return m != nil && (m[1] != "" || m[2] != "") && !strings.HasSuffix(m[1], ":latest")
}

// TestDockerCompose checks docker-compose.yml without Docker: the services
// of the stack; every image, and every FROM of the inline Dockerfile,
// pinned; no --dev, serve signing with a key ring from a volume a one-shot
// service fills; KurrentDB wired in a profile that runs serve on --store
// kurrent; a Patroni cluster in synchronous mode in a profile (ha) with a
// serve on it through a multi-host URL; Kafka reachable from the host on an
// EXTERNAL listener advertised as localhost on a published port; PostgreSQL
// not published on 5432; and every opledger command's flags and variables
// ones the commands take.
func TestDockerCompose(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docker-compose.yml")
	require.NoError(t, err)
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	require.NoError(t, dec.Decode(&c))

	for _, name := range []string{"postgres", "kafka", "kurrentdb", "provider-sim", "migrate", "signing-keys", "serve", "worker",
		"migrate-kurrent", "serve-kurrent", "worker-kurrent", "etcd", "migrate-ha", "serve-ha", "worker-ha"} {
		require.Contains(t, c.Services, name, "service %s", name)
	}
	require.False(t, strings.Contains(string(raw), ":latest"), "no floating latest tag")

	known := map[string]*settings.Setting{}
	for _, s := range settings.All {
		if s.Env != "" {
			known[s.Env] = s
		}
	}
	for name, s := range c.Services {
		require.NotContains(t, s.Command, "--dev", "%s: no ephemeral signing key", name)
		switch {
		case s.Image != "":
			require.True(t, pinned(s.Image), "%s: image %s is pinned", name, s.Image)
		case s.Build != nil:
			froms := fromLine.FindAllStringSubmatch(s.Build.Dockerfile, -1)
			require.NotEmpty(t, froms, name)
			for _, m := range froms {
				require.True(t, pinned(m[1]), "%s: FROM %s is pinned", name, m[1])
			}
			if !strings.Contains(s.Build.Dockerfile, "./cmd/opledger") {
				continue // not opledger (the Patroni members)
			}
			// An opledger command: its flags parse, and --help lists them.
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append(append([]string(nil), s.Command...), "--help"), &stdout, &stderr)
			require.Equal(t, 0, code, "%s: %v: %s", name, s.Command, stderr.String())
			for k, v := range s.Environment {
				if !envVariable.MatchString(k) {
					continue
				}
				setting, ok := known[k]
				require.True(t, ok, "%s: %s is a setting of the catalogue", name, k)
				if setting.Check != nil && v != "" {
					require.NoError(t, setting.Check(v), "%s: %s=%s", name, k, v)
				}
			}
		default:
			t.Fatalf("%s: neither image nor build", name)
		}
		for _, p := range s.Ports {
			require.False(t, strings.HasPrefix(p, "5432:"), "%s publishes 5432, a local PostgreSQL's port", name)
		}
	}

	serve := c.Services["serve"]
	require.Equal(t, "/var/lib/opledger/keys", serve.Environment["OPLEDGER_SIGNING_KEYS"])
	require.Contains(t, serve.Volumes, "signing-keys:/var/lib/opledger/keys:ro")
	require.Contains(t, c.Volumes, "signing-keys")
	keys := c.Services["signing-keys"]
	require.Equal(t, []string{"keys", "new", "--if-none"}, keys.Command)
	require.Contains(t, keys.Volumes, "signing-keys:/var/lib/opledger/keys")
	require.Contains(t, serve.DependsOn, "signing-keys")

	require.Equal(t, []string{"kurrent"}, c.Services["kurrentdb"].Profiles)
	sk := c.Services["serve-kurrent"]
	require.Equal(t, []string{"kurrent"}, sk.Profiles)
	require.Contains(t, strings.Join(sk.Command, " "), "serve --store kurrent")
	require.Equal(t, "esdb://kurrentdb:2113?tls=false", sk.Environment["KURRENTDB_URL"])
	require.NotEqual(t, serve.Environment["OPLEDGER_SCHEMA"], sk.Environment["OPLEDGER_SCHEMA"], "its own read models")
	require.Empty(t, sk.Environment["KAFKA_BROKERS"], "the Postgres-only transport of its own schema")
	require.Contains(t, strings.Join(c.Services["worker-kurrent"].Command, " "), "--store kurrent")

	// Profile ha: three Patroni members in synchronous mode on etcd, and the
	// ledger on them through a multi-host URL pgx reads, replication
	// required, a transport of its own.
	var patroni struct {
		Bootstrap struct {
			DCS struct {
				SynchronousMode bool `yaml:"synchronous_mode"`
				PostgreSQL      struct {
					Parameters map[string]string `yaml:"parameters"`
				} `yaml:"postgresql"`
			} `yaml:"dcs"`
		} `yaml:"bootstrap"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(c.Configs["patroni"].Content), &patroni))
	require.True(t, patroni.Bootstrap.DCS.SynchronousMode, "Patroni's synchronous_mode")
	require.Equal(t, "on", patroni.Bootstrap.DCS.PostgreSQL.Parameters["synchronous_commit"])
	require.Equal(t, []string{"ha"}, c.Services["etcd"].Profiles)
	members := 0
	for name, s := range c.Services {
		if s.Environment["PATRONI_NAME"] == "" {
			continue
		}
		members++
		require.Equal(t, []string{"ha"}, s.Profiles, name)
		require.Equal(t, name, s.Environment["PATRONI_NAME"])
		require.Equal(t, "etcd:2379", s.Environment["PATRONI_ETCD3_HOSTS"], name)
		require.Equal(t, name+":5432", s.Environment["PATRONI_POSTGRESQL_CONNECT_ADDRESS"])
		require.Contains(t, s.DependsOn, "etcd")
	}
	require.GreaterOrEqual(t, members, 2, "two or three PostgreSQL members")
	for _, name := range []string{"migrate-ha", "serve-ha", "worker-ha"} {
		s := c.Services[name]
		require.Equal(t, []string{"ha"}, s.Profiles, name)
		cfg, err := pgxpool.ParseConfig(s.Environment["DATABASE_URL"])
		require.NoError(t, err, name)
		require.Len(t, cfg.ConnConfig.Fallbacks, members-1, "%s: every member's host (the first, then the fallbacks)", name)
		require.NotNil(t, cfg.ConnConfig.ValidateConnect, "%s: target_session_attrs=read-write", name)
		require.Contains(t, s.Environment["DATABASE_URL"], "target_session_attrs=read-write")
		require.Equal(t, "true", s.Environment["OPLEDGER_REQUIRE_SYNC_REPLICATION"], name)
		require.Empty(t, s.Environment["KAFKA_BROKERS"], "%s: a transport of its own", name)
	}

	kafka := c.Services["kafka"]
	adv := kafka.Environment["KAFKA_ADVERTISED_LISTENERS"]
	m := regexp.MustCompile(`EXTERNAL://localhost:(\d+)`).FindStringSubmatch(adv)
	require.NotNil(t, m, "an EXTERNAL listener advertised as localhost: %s", adv)
	require.Contains(t, kafka.Ports, m[1]+":"+m[1], "the EXTERNAL port is published")
	require.Contains(t, kafka.Environment["KAFKA_LISTENERS"], "EXTERNAL://:"+m[1])
	require.Contains(t, kafka.Environment["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], "EXTERNAL:")

	tokens, err := httpapi.ParseTokens(strings.NewReader(c.Configs["tokens"].Content), "docker-compose.yml tokens")
	require.NoError(t, err, "serve reads the tokens file")
	require.Empty(t, tokens.PlainLines(), "the tokens file holds digests, no plain token")
	who, ok := tokens.Authenticate("local-operator-token-0001")
	require.True(t, ok, "the header's operator token is the file's")
	require.Equal(t, httpapi.RoleOperator, who.Role)
}

func TestPinned(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]bool{
		"postgres:16.6": true, "apache/kafka:3.9.0": true, "golang:1.26.8-bookworm": true, "scratch": true,
		"docker.kurrent.io/kurrent-lts/kurrentdb:26.0.3": true, "x@sha256:" + strings.Repeat("a", 64): true,
		"postgres": false, "postgres:latest": false, "gcr.io/distroless/static-debian12:nonroot": false, "golang:1.26": true,
	} {
		require.Equal(t, want, pinned(ref), ref)
	}
}
