package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/domain/audit"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
)

// demoKept runs `opledger demo --keep` and returns its schemas' prefix; the
// schemas are dropped when the test ends.
func demoKept(t *testing.T) string {
	t.Helper()
	var out, errs bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"demo", "--keep", "--database-url", pgtest.URL()}, &out, &errs), "stdout:\n%s\nstderr:\n%s", out.String(), errs.String())
	m := regexp.MustCompile(`DROP SCHEMA (\S+)_store CASCADE`).FindStringSubmatch(out.String())
	require.NotNil(t, m, "the demo prints how to drop what it kept:\n%s", out.String())
	prefix := m[1]
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), pgtest.URL())
		if err != nil {
			return
		}
		defer pool.Close()
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+prefix+`_store CASCADE; DROP SCHEMA IF EXISTS `+prefix+` CASCADE; DROP SCHEMA IF EXISTS `+prefix+`_transport CASCADE`)
	})
	return prefix
}

// deployment is a set-up to check: the files serve would be given, a
// provider and Kafka.
type deployment struct {
	dir, keys, tokens, digestKey, digestDir, providerURL, brokers string
}

// newDeployment makes what an operator makes before serve's first start,
// with the commands the README gives: a key ring, a tokens file of
// digests, a digest key and the directory serve signs digests into; a
// provider simulator, and Kafka with the transport's topics.
func newDeployment(t *testing.T, prefix string) deployment {
	t.Helper()
	d := deployment{dir: t.TempDir()}
	d.keys, d.tokens = filepath.Join(d.dir, "keys"), filepath.Join(d.dir, "tokens")
	d.digestKey, d.digestDir = filepath.Join(d.dir, "digest.key"), filepath.Join(d.dir, "digests")
	cli := func(args ...string) string {
		var out, errs bytes.Buffer
		require.Equal(t, 0, run(t.Context(), args, &out, &errs), "%s: %s", strings.Join(args, " "), errs.String())
		return out.String()
	}
	cli("keys", "new", "--signing-keys", d.keys)
	var lines strings.Builder
	for _, role := range []string{"worker", "operator", "auditor"} {
		lines.WriteString(cli("tokens", "new", role, role+"-1"))
	}
	require.NoError(t, os.WriteFile(d.tokens, []byte(lines.String()), 0o600))
	cli("audit", "digest-key", "new", "--out", d.digestKey)
	require.NoError(t, os.Mkdir(d.digestDir, 0o700))

	s, err := sim.New(sim.Config{Profile: sim.ProfileStripeV1})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	d.providerURL = srv.URL

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, transport.TopicRefundRequests),
		kfake.SeedTopics(1, transport.TopicDeadLetters, transport.TopicSecuritySignals, transport.TopicOperationFeed))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	d.brokers = strings.Join(kc.ListenAddrs(), ",")
	return d
}

func (d deployment) args(prefix string) []string {
	return []string{"doctor", "--database-url", pgtest.URL(), "--store-schema", prefix + "_store", "--schema", prefix,
		"--transport-schema", prefix + "_transport", "--signing-keys", d.keys, "--tokens", d.tokens,
		"--digest-key", d.digestKey, "--public-key", d.digestKey + ".pub", "--digest-every", "1h", "--digest-dir", d.digestDir,
		"--provider-url", d.providerURL, "--export-delivery-url", d.providerURL, "--kafka-brokers", d.brokers}
}

func doctorRun(t *testing.T, args ...string) (int, string, doctorReport) {
	t.Helper()
	var out, errs bytes.Buffer
	code := run(t.Context(), args, &out, &errs)
	require.Empty(t, errs.String())
	text := out.String()
	out.Reset()
	require.Equal(t, code, run(t.Context(), append(args, "--json"), &out, &errs), "the same verdict as JSON")
	var rep doctorReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	t.Logf("opledger %s\n%s", strings.Join(args, " "), text)
	return code, text, rep
}

func verdicts(rep doctorReport) map[string]string {
	out := map[string]string{}
	for _, c := range rep.Checks {
		out[c.Name] = c.Verdict
	}
	return out
}

// TestDoctorOnTheDemosKeptDatabase: against the database the demo kept,
// with the files a deployment is given, every check passes but
// replication (a single PostgreSQL) and digests (none signed yet: serve
// signs the first at start — on this log it would refuse, the demo's
// forgery is in it), which warn; doctor exits 0.
func TestDoctorOnTheDemosKeptDatabase(t *testing.T) {
	t.Parallel()
	prefix := demoKept(t)
	d := newDeployment(t, prefix)
	code, text, rep := doctorRun(t, d.args(prefix)...)
	require.Equal(t, 0, code, text)
	require.Equal(t, verdictWarn, rep.Verdict)
	require.Equal(t, map[string]string{
		"database": verdictOK, "schemas": verdictOK, "signing-keys": verdictOK, "digest-key": verdictOK, "tokens": verdictOK,
		"replication": verdictWarn, "clock": verdictOK, "kafka": verdictOK, "provider": verdictOK, "export-delivery": verdictOK,
		"digests": verdictWarn, "read-models": verdictOK,
	}, verdicts(rep), text)
	require.Contains(t, text, "tokens           "+d.tokens+": 3 tokens, digests only")
	require.Contains(t, text, transport.TopicRefundRequests+" 3 partition(s)")
	require.Contains(t, text, "read-models      caught up with the log")
	require.Contains(t, text, "verdict: WARN (10 ok, 2 warnings, 0 failed, 0 skipped)")
}

// TestDoctorNamesEachProblem: a set-up broken the ways a deployment is
// (a wrong key, an unmigrated schema, an unreachable provider, a tokens
// file others may read holding a plain token) fails, and each problem is
// named on its own line with what to do.
func TestDoctorNamesEachProblem(t *testing.T) {
	t.Parallel()
	prefix := demoKept(t)
	d := newDeployment(t, prefix)

	// A wrong key: the public key auditors hold is another digest key's.
	var out, errs bytes.Buffer
	other := filepath.Join(d.dir, "other.key")
	require.Equal(t, 0, run(t.Context(), []string{"audit", "digest-key", "new", "--out", other}, &out, &errs), errs.String())
	// An unreachable provider: a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	// A tokens file every user may read, with a plain token in it.
	require.NoError(t, os.WriteFile(d.tokens, []byte("operator plain-token-0123456789abcdef op\n"), 0o644))
	require.NoError(t, os.Chmod(d.tokens, 0o644))

	args := d.args(prefix)
	for i, a := range args {
		switch {
		case a == "--schema": // an unmigrated schema: the read models' were never created
			args[i+1] = prefix + "_never_migrated"
		case a == "--public-key":
			args[i+1] = other + ".pub"
		case a == "--provider-url":
			args[i+1] = closed
		}
	}
	code, text, rep := doctorRun(t, args...)
	require.Equal(t, 1, code, text)
	require.Equal(t, verdictFail, rep.Verdict)
	v := verdicts(rep)
	for _, name := range []string{"schemas", "digest-key", "provider", "tokens"} {
		require.Equal(t, verdictFail, v[name], "%s:\n%s", name, text)
	}
	require.Equal(t, verdictSkip, v["read-models"], "no read models to measure")
	require.Regexp(t, `(?m)^FAIL +schemas +read models `+prefix+`_never_migrated: .*never`, text)
	require.Contains(t, text, "→ run 'opledger migrate")
	require.Regexp(t, `(?m)^FAIL +digest-key +the public key .*other\.key\.pub .* is not the digest key's`, text)
	require.Regexp(t, `(?m)^FAIL +provider +`+regexp.QuoteMeta(closed)+` does not answer: .*refused`, text)
	require.Regexp(t, `(?m)^FAIL +tokens +.*plain tokens on lines \[1\].*world-readable \(0644\)`, text)
	require.NotContains(t, text, "plain-token-0123456789abcdef", "a token is never printed")

	// The digest key is a capability signing key: named too.
	seed, err := os.ReadFile(d.digestKey)
	require.NoError(t, err)
	single := filepath.Join(d.dir, "single.key")
	require.NoError(t, os.WriteFile(single, seed, 0o600))
	for i, a := range args {
		if a == "--signing-keys" {
			args[i], args[i+1] = "--signing-key", single
		}
	}
	_, text, _ = doctorRun(t, args...)
	require.Regexp(t, `(?m)^FAIL +digest-key +the digest key .* is the capability signing key`, text)
}

// TestDoctorDigests: a digest serve signed within twice its interval, by
// the digest key given, passes; a late one and one another key signed
// fail, each saying so.
func TestDoctorDigests(t *testing.T) {
	t.Parallel()
	store := memory.New(nil)
	playStory(t, store)
	dir := t.TempDir()
	key := filepath.Join(dir, "digest.key")
	_, err := newDigestKey(key)
	require.NoError(t, err)
	signer, err := loadDigestSigner(key)
	require.NoError(t, err)
	signed := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	dg, err := audit.NewDigester(store).Sign(signer, signed)
	require.NoError(t, err)
	require.NoError(t, writeDigestTo(dg, filepath.Join(dir, "latest.json"), nil))

	check := func(at time.Time, s *audit.DigestSigner) doctorCheck {
		d := &doctor{cfg: doctorConfig{digestEvery: time.Hour, digestDir: dir, now: func() time.Time { return at }}, digester: s}
		d.digests()
		require.Len(t, d.checks, 1)
		return d.checks[0]
	}
	c := check(signed.Add(90*time.Minute), signer)
	require.Equal(t, verdictOK, c.Verdict, c.Detail)
	require.Contains(t, c.Detail, "signed 1h30m0s ago by "+signer.KeyID()+" (every 1h0m0s)")
	c = check(signed.Add(3*time.Hour), signer)
	require.Equal(t, verdictFail, c.Verdict)
	require.Contains(t, c.Detail, "signed 3h0m0s ago")
	require.Contains(t, c.Detail, ": late")

	other := filepath.Join(dir, "other.key")
	_, err = newDigestKey(other)
	require.NoError(t, err)
	otherSigner, err := loadDigestSigner(other)
	require.NoError(t, err)
	c = check(signed.Add(time.Minute), otherSigner)
	require.Equal(t, verdictFail, c.Verdict)
	require.Contains(t, c.Fix, "not the one serve signs with")
}
