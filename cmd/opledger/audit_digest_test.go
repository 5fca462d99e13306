package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/domain/audit"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
)

// playStory writes the seed story into store.
func playStory(t *testing.T, store eventstore.Store) {
	t.Helper()
	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	sum, err := harness.RunStory(t.Context(), w, io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sum.RefundsCreated)
}

// waitVisible waits, bounded, until every event of the store in schema is
// below the cluster's visibility horizon (pg_snapshot_xmin): the log's
// readers read only there, and another test's transaction in flight
// anywhere in the cluster holds the horizon back for a moment. A test that
// counts what a reader read waits for it first.
func waitVisible(t *testing.T, url, schema string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	events := pgx.Identifier{schema, "events"}.Sanitize()
	require.Eventually(t, func() bool {
		var hidden int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+events+` WHERE transaction_id >= pg_snapshot_xmin(pg_current_snapshot())`).Scan(&hidden)
		return err == nil && hidden == 0
	}, 30*time.Second, 10*time.Millisecond, "the events are below the cluster's visibility horizon")
}

// cli runs opledger with args and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := run(t.Context(), args, &out, &errs)
	return code, out.String() + errs.String()
}

// TestAuditDigestCommands: an auditor makes a key and a digest, verifies
// the log against it, proves OP-4471's history and checks the proof
// offline; a DBA then changes the refund's amount, and verify catches it
// with the digest and without, while the proof still checks and an edited
// proof does not.
func TestAuditDigestCommands(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	playStory(t, store)
	db := []string{"--database-url", url, "--store-schema", schema}
	dir := t.TempDir()
	key, digest, proof := filepath.Join(dir, "digest.key"), filepath.Join(dir, "d1.json"), filepath.Join(dir, "op-4471.proof.json")

	code, out := cli(t, "audit", "digest-key", "new", "--out", key)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "digest key digest-")
	st, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the private key is the owner's only")
	code, out = cli(t, "audit", "digest-key", "new", "--out", key)
	require.Equal(t, 1, code, "a key is never overwritten")
	require.Contains(t, out, "exists")

	code, out = cli(t, append([]string{"audit", "digest", "--digest-key", key, "--out", digest}, db...)...)
	require.Equal(t, 0, code, out)
	code, out = cli(t, append([]string{"audit", "verify", "--digest", digest, "--public-key", key + ".pub"}, db...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "digest (")
	require.Contains(t, out, "MATCHES")
	code, out = cli(t, append([]string{"audit", "verify", "--digest", digest}, db...)...)
	require.Equal(t, 1, code, "a digest is not taken on trust")
	require.Contains(t, out, "--public-key")

	code, out = cli(t, append([]string{"audit", "prove", "OP-4471", "--digest", digest, "--out", proof}, db...)...)
	require.Equal(t, 0, code, out)
	code, out = cli(t, "audit", "check-proof", proof, "--digest", digest, "--public-key", key+".pub", "--database-url", "postgres://nobody@127.0.0.1:1/none")
	require.Equal(t, 2, code, "check-proof takes no database flags: it reads nothing but its files")
	code, out = cli(t, "audit", "check-proof", proof, "--digest", digest, "--public-key", key+".pub")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "audit check-proof: OK")

	// A DBA changes the 120.00 refund to 200.00.
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `UPDATE `+pgx.Identifier{schema, "events"}.Sanitize()+
		` SET data = jsonb_set(data, '{amount_minor}', '20000') WHERE event_type = 'OperationRequested'`)
	require.NoError(t, err)

	code, out = cli(t, append([]string{"audit", "verify"}, db...)...)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "H1 hash-chain-intact")
	code, out = cli(t, append([]string{"audit", "verify", "--digest", digest, "--public-key", key + ".pub"}, db...)...)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "D1 log-matches-digest")
	require.Contains(t, out, "event 0 (position")
	code, out = cli(t, append([]string{"audit", "prove", "OP-4471", "--digest", digest}, db...)...)
	require.Equal(t, 1, code, "no proof from a departed log")
	require.Contains(t, out, "departs from the digest")

	code, out = cli(t, "audit", "check-proof", proof, "--digest", digest, "--public-key", key+".pub")
	require.Equal(t, 0, code, "the proof handed out before still checks: %s", out)
	raw, err := os.ReadFile(proof)
	require.NoError(t, err)
	edited := filepath.Join(dir, "edited.json")
	require.NoError(t, os.WriteFile(edited, bytes.Replace(raw, []byte(`"amount_minor": 12000`), []byte(`"amount_minor": 20000`), 1), 0o644))
	code, out = cli(t, "audit", "check-proof", edited, "--digest", digest, "--public-key", key+".pub")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FAILED")
}

// TestServeDigestRole: serve's digest role writes a signed digest at its
// first tick, a new one when the log grew, none when it did not.
func TestServeDigestRole(t *testing.T) {
	t.Parallel()
	store := memory.New(nil)
	playStory(t, store)
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	_, err := newDigestKey(key)
	require.NoError(t, err)
	out := filepath.Join(dir, "digests")
	require.NoError(t, os.Mkdir(out, 0o755))
	clock := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	f := &digestFlags{every: "1h", dir: out, keyFile: key, now: func() time.Time { return clock }}
	require.NoError(t, f.validate())
	signer, err := loadDigestSigner(key)
	require.NoError(t, err)
	var ticks []time.Time
	d := &scheduledDigests{store: store, digester: audit.NewDigester(store), signer: signer, dir: out, now: f.now, log: slog.New(slog.DiscardHandler),
		current: func(at time.Time) { ticks = append(ticks, at) }}

	d.once(t.Context())
	require.Equal(t, []time.Time{clock}, ticks, "the tick that signed reports it")
	files, err := filepath.Glob(filepath.Join(out, "digest-*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	latest, err := readDigest(filepath.Join(out, "latest.json"), "latest")
	require.NoError(t, err)
	require.NoError(t, latest.CheckSignature(signer.DigestVerifier))
	first := latest.TreeSize
	require.Positive(t, first)

	d.once(t.Context())
	files, _ = filepath.Glob(filepath.Join(out, "digest-*.json"))
	require.Len(t, files, 1, "the log did not grow: no new digest")
	require.Len(t, ticks, 2, "the digest signed before still covers the log: on schedule")

	_, err = store.Append(t.Context(), "evidence-unattributed-test", eventstore.NoStream(), []eventstore.EventData{{ID: "0193a5c2-7b1e-7000-8000-00000000abcd", Type: "Noted", Data: []byte(`{}`)}})
	require.NoError(t, err)
	clock = clock.Add(time.Hour)
	d.once(t.Context())
	files, _ = filepath.Glob(filepath.Join(out, "digest-*.json"))
	require.Len(t, files, 2)
	latest, err = readDigest(filepath.Join(out, "latest.json"), "latest")
	require.NoError(t, err)
	require.Equal(t, first+1, latest.TreeSize)
	require.True(t, strings.HasSuffix(files[1], "-20261127T170000Z.json"), files)
	require.Equal(t, clock, ticks[2])

	rep, err := audit.Verify(t.Context(), store, audit.VerifyOptions{Digest: latest, DigestKey: signer.DigestVerifier})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Violations)
}

func TestServeDigestFlagsAreChecked(t *testing.T) {
	t.Parallel()
	err := (&digestFlags{every: "soon"}).validate()
	require.ErrorContains(t, err, "--digest-every")
	require.ErrorContains(t, err, "--digest-dir")
	require.ErrorContains(t, err, digestKeyEnv)
	require.NoError(t, (&digestFlags{}).validate(), "off by default")
}

// TestAuditConsistencyCommands: verify with two digests writes the proof
// that the later extends the earlier, and check-consistency checks it from
// the two digests and the public key alone; given in the wrong order, or
// with a proof edited, it says NOT PROVED.
func TestAuditConsistencyCommands(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	playStory(t, store)
	waitVisible(t, url, schema)
	db := []string{"--database-url", url, "--store-schema", schema}
	dir := t.TempDir()
	key, d1, d2, proof := filepath.Join(dir, "digest.key"), filepath.Join(dir, "d1.json"), filepath.Join(dir, "d2.json"), filepath.Join(dir, "c.json")
	code, out := cli(t, "audit", "digest-key", "new", "--out", key)
	require.Equal(t, 0, code, out)
	code, out = cli(t, append([]string{"audit", "digest", "--digest-key", key, "--out", d1}, db...)...)
	require.Equal(t, 0, code, out)

	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	_, err = w.Approve(t.Context(), "OP-7001", "ORD-7001", 1000) // the log grows
	require.NoError(t, err)
	waitVisible(t, url, schema)
	code, out = cli(t, append([]string{"audit", "digest", "--digest-key", key, "--out", d2}, db...)...)
	require.Equal(t, 0, code, out)

	code, out = cli(t, append([]string{"audit", "verify", "--consistency-out", proof}, db...)...)
	require.Equal(t, 1, code, "the proof is about two digests")
	require.Contains(t, out, "--consistency-out needs --previous and --digest")
	code, out = cli(t, append([]string{"audit", "verify", "--digest", d2, "--previous", d1, "--public-key", key + ".pub", "--consistency-out", proof}, db...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "the later digest extends it")

	check := func(args ...string) (int, string) {
		return cli(t, append([]string{"audit", "check-consistency"}, args...)...)
	}
	code, out = check(proof, "--previous", d1, "--digest", d2, "--public-key", key+".pub", "--database-url", "postgres://nobody@127.0.0.1:1/none")
	require.Equal(t, 2, code, "check-consistency takes no database flags: it reads nothing but its files")
	code, out = check(proof, "--previous", d1, "--digest", d2, "--public-key", key+".pub")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "OK: the digest of ")
	code, out = check(proof, "--previous", d2, "--digest", d1, "--public-key", key+".pub")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "NOT PROVED")

	raw, err := os.ReadFile(proof)
	require.NoError(t, err)
	p, err := audit.ParseConsistencyProof(bytes.NewReader(raw))
	require.NoError(t, err)
	require.NotEmpty(t, p.Hashes)
	edited := filepath.Join(dir, "edited.json")
	require.NoError(t, os.WriteFile(edited, bytes.Replace(raw, []byte(p.Hashes[0]), []byte(strings.Repeat("a", 64)), 1), 0o644))
	code, out = check(edited, "--previous", d1, "--digest", d2, "--public-key", key+".pub")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "NOT PROVED")
	code, out = check("--previous", d1, "--digest", d2, "--public-key", key+".pub")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "one proof file is required")
}
