package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/regression"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// toldRegressions keeps what an observer was told.
type toldRegressions struct {
	mu   sync.Mutex
	regs []eventstore.Regression
}

func (t *toldRegressions) ObserveRegression(_ context.Context, r eventstore.Regression) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.regs = append(t.regs, r)
}

func (t *toldRegressions) all() []eventstore.Regression {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]eventstore.Regression(nil), t.regs...)
}

// digestRig is serve's digest role over a PostgreSQL store, with its
// regressions told to told.
type digestRig struct {
	t      *testing.T
	url    string
	schema string
	store  eventstore.Store
	dir    string
	key    string
	clock  time.Time
	told   *toldRegressions
}

func newDigestRig(t *testing.T) *digestRig {
	url, schema := pgtest.Schema(t)
	r := &digestRig{t: t, url: url, schema: schema, store: pgtest.OpenMigrated(t, url, schema), dir: t.TempDir(),
		clock: time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC), told: &toldRegressions{}}
	r.key = filepath.Join(t.TempDir(), "k")
	_, err := newDigestKey(r.key)
	require.NoError(t, err)
	return r
}

// role is a digest role as serve starts it (a fresh process: no tree).
func (r *digestRig) role(monitor *regression.Monitor) *scheduledDigests {
	signer, err := loadDigestSigner(r.key)
	require.NoError(r.t, err)
	return &scheduledDigests{store: r.store, digester: audit.NewDigester(r.store), signer: signer, dir: r.dir,
		now: func() time.Time { return r.clock }, log: slog.New(slog.DiscardHandler), regressions: r.told, monitor: monitor}
}

// write appends n events to stream.
func (r *digestRig) write(stream string, n int) {
	for range n {
		_, err := r.store.Append(r.t.Context(), stream, eventstore.Any(), []eventstore.EventData{{ID: uuid.NewString(), Type: "Noted", Data: []byte(`{}`)}})
		require.NoError(r.t, err)
	}
	waitVisible(r.t, r.url, r.schema)
}

// tick runs one tick an hour after the last and returns latest.json.
func (r *digestRig) tick(d *scheduledDigests) *audit.Digest {
	r.clock = r.clock.Add(time.Hour)
	d.once(r.t.Context())
	latest, err := readDigest(filepath.Join(r.dir, "latest.json"), "latest")
	require.NoError(r.t, err)
	return latest
}

// verifies reports whether the log as it is verifies against dg.
func (r *digestRig) verifies(dg *audit.Digest) bool {
	signer, err := loadDigestSigner(r.key)
	require.NoError(r.t, err)
	rep, err := audit.Verify(r.t.Context(), r.store, audit.VerifyOptions{Digest: dg, DigestKey: signer.DigestVerifier})
	require.NoError(r.t, err)
	if !rep.OK() {
		r.t.Logf("verify against the digest of %d events: complete %v, %+v", dg.TreeSize, rep.Complete, rep.Violations)
	}
	return rep.OK()
}

// TestServeDigestsNeverCoverALostHistory, on PostgreSQL: the store loses
// the log's last events (their rows deleted, their stream's head set back:
// what a failover to an asynchronous standby leaves). The running digest
// role notices its tree's last event is gone, says so (cache digest_tree)
// and signs the log as it is — not the tree it remembered; a serve started
// after the loss notices it against the last digest it signed; and a
// regression another process recorded, which the tree's last event
// survived, makes it build the tree again.
func TestServeDigestsNeverCoverALostHistory(t *testing.T) {
	t.Parallel()
	r := newDigestRig(t)
	r.write("notes-a", 3)
	r.write("notes-b", 4)
	d := r.role(nil)
	first := r.tick(d)
	require.Equal(t, uint64(7), first.TreeSize)
	require.Empty(t, r.told.all())

	pgtest.Shorten(t, r.url, r.schema, "notes-b", 1) // its last two events are lost
	waitVisible(t, r.url, r.schema)
	second := r.tick(d)
	require.Equal(t, uint64(5), second.TreeSize, "the log as the store holds it")
	require.True(t, r.verifies(second), "the new digest covers what the store holds")
	require.False(t, r.verifies(first), "the earlier one covered what it lost")
	told := r.told.all()
	require.Len(t, told, 1)
	require.Equal(t, domain.CacheDigestTree, told[0].Cache)
	require.Equal(t, first.Position, told[0].SeenPosition)
	require.NotEmpty(t, told[0].SeenEventID)

	// A serve started after the store lost more: its first tick compares
	// the log with latest.json.
	pgtest.Shorten(t, r.url, r.schema, "notes-b", 0)
	waitVisible(t, r.url, r.schema)
	third := r.tick(r.role(nil))
	require.Equal(t, uint64(4), third.TreeSize)
	told = r.told.all()
	require.Len(t, told, 2, "noticed at start, against the last digest signed")
	require.Contains(t, told[1].Detail, "covers 5 events; the log holds 4")

	// Another process recorded a regression of an event in the middle of
	// the tree (the tree's last event survives): the next tick builds the
	// tree again rather than sign what it remembers.
	monitor, err := regression.NewMonitor(regression.MonitorConfig{Store: r.store})
	require.NoError(t, err)
	d = r.role(monitor)
	r.tick(d)
	r.write("notes-c", 2)
	pgtest.Shorten(t, r.url, r.schema, "notes-a", 1) // not the log's tail: the tree's last event survives
	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: r.store, Noticer: "worker-2", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rec.ObserveRegression(t.Context(), eventstore.Regression{Cache: domain.CacheWorker, Stream: "notes-a", SeenVersion: 2, HeldVersion: 1})
	waitVisible(t, r.url, r.schema)
	fourth := r.tick(d)
	require.True(t, r.verifies(fourth), "rebuilt from the log as it is: %d events", fourth.TreeSize)
	require.Equal(t, uint64(4-1+2+1), fourth.TreeSize, "the event lost, the two written and the LogRegressed")
	require.Len(t, r.told.all(), 2, "another's regression: rebuilt, not told again")
	_, err = os.Stat(filepath.Join(r.dir, fmt.Sprintf("digest-%09d-%s.json", fourth.TreeSize, r.clock.Format("20060102T150405Z"))))
	require.NoError(t, err)
}
