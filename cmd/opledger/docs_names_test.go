package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/cmd/opledger/internal/settings"
)

// The sections that tell an operator how to survive the loss of a machine
// name settings, flags, metrics, commands, scripts and PostgreSQL's own
// names; each must be real, so that the advice cannot drift from the code:
// an opledger variable or flag is in the settings catalogue (a flag after
// `opledger CMD` is one CMD takes, after `scripts/X.sh` one the script
// parses), a metric is registered somewhere in
// the code, a command exists, a script exists, a compose profile is in
// docker-compose.yml, and what the replication probe asks PostgreSQL is
// named by the section that explains it.
var operatorSections = []struct{ file, heading string }{
	{"docs/operations.md", "High availability"},
	{"docs/transport.md", "A worker dies"},
	{"docs/operations.md", "Alerts and runbooks"},
	{"docs/operations.md", "opledger doctor"},
}

var (
	backquotedSpan = regexp.MustCompile("`([^`]+)`")
	envName        = regexp.MustCompile(`\b(OPLEDGER_[A-Z0-9_]+|DATABASE_URL|KAFKA_[A-Z0-9_]+)\b`)
	flagName       = regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]+)`)
	metricName     = regexp.MustCompile(`\bopledger_[a-z0-9_]+\b`)
	commandName    = regexp.MustCompile(`^opledger ([a-z-]+)`)
	scriptName     = regexp.MustCompile(`\bscripts/[a-z0-9_-]+\.sh\b`)
	composeProfile = regexp.MustCompile(`^docker compose --profile ([a-z0-9-]+)`)
	settingAsked   = regexp.MustCompile(`current_setting\('([a-z_]+)'\)`)
)

func TestOperatorSectionsNameWhatExists(t *testing.T) {
	t.Parallel()
	root := "../.."
	metrics := registeredMetrics(t, root)
	envs, flags := map[string]bool{}, map[string]bool{}
	for _, s := range settings.All {
		envs[s.Env] = true
		flags[s.Flag] = true
		for _, f := range s.FlagIn {
			flags[f] = true
		}
	}
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	helpOf := map[string]string{}
	var problems []string
	for _, sec := range operatorSections {
		text := section(t, filepath.Join(root, sec.file), sec.heading)
		where := sec.file + ` "` + sec.heading + `"`
		for _, m := range backquotedSpan.FindAllStringSubmatch(text, -1) {
			span := m[1]
			for _, e := range envName.FindAllString(span, -1) {
				if !envs[e] {
					problems = append(problems, where+": names "+e+", which no setting reads")
				}
			}
			cmd := ""
			if c := commandName.FindStringSubmatch(span); c != nil {
				cmd = c[1]
				if _, ok := commands[cmd]; !ok {
					problems = append(problems, where+": names `opledger "+cmd+"`, which is no command")
					cmd = ""
				}
			}
			if p := composeProfile.FindStringSubmatch(span); p != nil {
				if !regexp.MustCompile(`profiles:\s*\[[^\]]*\b` + p[1] + `\b`).Match(compose) {
					problems = append(problems, where+": names the compose profile "+p[1]+", which docker-compose.yml lacks")
				}
				continue
			}
			script := ""
			if sc := scriptName.FindString(span); sc != "" && strings.HasPrefix(span, sc) {
				raw, err := os.ReadFile(filepath.Join(root, sc))
				if err == nil {
					script = string(raw)
				}
			}
			for _, f := range flagName.FindAllStringSubmatch(span, -1) {
				switch {
				case script != "":
					if !strings.Contains(script, "--"+f[1]+")") {
						problems = append(problems, where+": names `"+span+"`, a flag the script does not take")
					}
				case f[1] == "help":
				case cmd != "":
					if _, ok := helpOf[cmd]; !ok {
						var out, errOut bytes.Buffer
						run(context.Background(), []string{cmd, "--help"}, &out, &errOut)
						helpOf[cmd] = out.String() + errOut.String()
					}
					if !strings.Contains(helpOf[cmd], "--"+f[1]+" ") && !strings.Contains(helpOf[cmd], "--"+f[1]+"\n") {
						problems = append(problems, where+": names `opledger "+cmd+" --"+f[1]+"`, a flag "+cmd+" does not take")
					}
				case !flags[f[1]]:
					problems = append(problems, where+": names --"+f[1]+", which no setting is")
				}
			}
			for _, name := range metricName.FindAllString(span, -1) {
				if _, pending := pendingContract[name]; !metrics[name] && !pending { // pendingContract: monitoring_test.go
					problems = append(problems, where+": names the metric "+name+", which nothing registers")
				}
			}
			for _, sc := range scriptName.FindAllString(span, -1) {
				if _, err := os.Stat(filepath.Join(root, sc)); err != nil {
					problems = append(problems, where+": names "+sc+", which does not exist")
				}
			}
		}
	}
	require.Empty(t, problems, "\n"+strings.Join(problems, "\n"))
}

// The high-availability section names every setting the replication probe
// asks PostgreSQL, and pg_stat_replication's states it counts; and the
// multi-host URL it recommends is one pgx reads, with its read-write
// target.
func TestHighAvailabilityNamesWhatTheProbeAsks(t *testing.T) {
	t.Parallel()
	root := "../.."
	text := section(t, filepath.Join(root, "docs/operations.md"), "High availability")
	probe, err := os.ReadFile(filepath.Join(root, "eventstore/postgres/replication.go"))
	require.NoError(t, err)
	asked := settingAsked.FindAllStringSubmatch(string(probe), -1)
	require.NotEmpty(t, asked)
	named := func(name string) bool { // within backquotes, as a word
		word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
		for _, m := range backquotedSpan.FindAllStringSubmatch(text, -1) {
			if word.MatchString(m[1]) {
				return true
			}
		}
		return false
	}
	for _, m := range asked {
		require.True(t, named(m[1]), "the section names %s, which the probe asks", m[1])
	}
	for _, name := range []string{"pg_stat_replication", "sync_state", "sync", "quorum", "pg_read_all_stats"} {
		require.Contains(t, string(probe), name, "the probe asks %s", name)
		require.True(t, named(name), "the section names %s", name)
	}
	// The Patroni settings it recommends are the ones failover.sh runs
	// with and docker-compose.yml configures.
	script, err := os.ReadFile(filepath.Join(root, "scripts/failover.sh"))
	require.NoError(t, err)
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	for _, key := range []string{"synchronous_mode", "maximum_lag_on_failover", "ttl", "loop_wait"} {
		require.True(t, named(key), "the section names Patroni's %s", key)
		require.Contains(t, string(script), key+":", "scripts/failover.sh sets %s", key)
		require.Contains(t, string(compose), key+":", "docker-compose.yml sets %s", key)
	}
	urls := regexp.MustCompile("`(postgres://[^`]*target_session_attrs=read-write[^`]*)`").FindAllStringSubmatch(text, -1)
	require.NotEmpty(t, urls, "the section shows the multi-host DATABASE_URL")
	for _, u := range urls {
		cfg, err := pgxpool.ParseConfig(u[1])
		require.NoError(t, err, u[1])
		require.Greater(t, len(cfg.ConnConfig.Fallbacks), 0, "%s: several hosts", u[1])
		require.NotNil(t, cfg.ConnConfig.ValidateConnect, "%s: pgx checks each connection accepts writes", u[1])
	}
}

// section is the text under "## heading" (or a deeper heading) of path,
// up to the next heading of the same or a higher level.
func section(t *testing.T, path, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(raw), "\n")
	level, start := 0, -1
	for i, l := range lines {
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if hashes == 0 || !strings.HasPrefix(l[hashes:], " ") {
			continue
		}
		if start >= 0 && hashes <= level {
			return strings.Join(lines[start:i], "\n")
		}
		if start < 0 && strings.TrimSpace(l[hashes:]) == heading {
			level, start = hashes, i
		}
	}
	require.GreaterOrEqual(t, start, 0, "%s has a heading %q", path, heading)
	return strings.Join(lines[start:], "\n")
}

// registeredMetrics are the metric names the code defines (Name:
// "opledger_...").
func registeredMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	named := regexp.MustCompile(`Name:\s*"(opledger_[a-z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range named.FindAllStringSubmatch(string(raw), -1) {
			out[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
