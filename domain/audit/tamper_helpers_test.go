package audit_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/domain/audit"
	"opledger/eventstore"
	"opledger/eventstore/chain"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// An insider rewrites a store's stored events behind its back: raw SQL on
// PostgreSQL's tables, the in-process KurrentDB server's storage, the
// memory store's slice. Each forgery below is written once for the row-level
// insiders (memory, KurrentDB) and once in SQL.
type insider struct {
	name  string
	store eventstore.Store
	// rows rewrites the log given as rows in global order (memory, kurrent);
	// fixHeads makes the memory store's heads follow (a careful forger).
	rows func(t *testing.T, fixHeads bool, f func(log []row) []row)
	// sql runs statements on the PostgreSQL store's schema (postgres).
	sql func(t *testing.T, query string, args ...any)
	// heads reports whether the store keeps stream heads apart from the log.
	heads bool
}

// row is an event as a row-level insider sees it: the port's fields and
// its chain link (the KurrentDB insider wraps them back into the stored
// custom metadata as the store does).
type row struct {
	eventstore.RecordedEvent
	contentType string
}

var insiders = []struct {
	name string
	open func(t *testing.T) *insider
}{
	{"memory", openMemoryInsider},
	{"postgres", openPostgresInsider},
	{"kurrent", openKurrentInsider},
}

func openMemoryInsider(t *testing.T) *insider {
	store := memory.New(nil)
	return &insider{name: "memory", store: store, heads: true, rows: func(t *testing.T, fixHeads bool, f func([]row) []row) {
		store.Tamper(!fixHeads, func(log []eventstore.RecordedEvent) []eventstore.RecordedEvent {
			rows := make([]row, len(log))
			for i, e := range log {
				rows[i] = row{RecordedEvent: e}
			}
			out := f(rows)
			log = make([]eventstore.RecordedEvent, len(out))
			for i, r := range out {
				log[i] = r.RecordedEvent
			}
			return log
		})
	}}
}

func openPostgresInsider(t *testing.T) *insider {
	store := pgtest.OpenStore(t)
	conn, err := pgx.Connect(t.Context(), pgtest.URL())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(t.Context(), "SET search_path TO "+pgx.Identifier{store.Schema()}.Sanitize())
	require.NoError(t, err)
	return &insider{name: "postgres", store: store, heads: true, sql: func(t *testing.T, query string, args ...any) {
		t.Helper()
		_, err := conn.Exec(t.Context(), query, args...)
		require.NoError(t, err, "insider SQL: %s", query)
	}}
}

func openKurrentInsider(t *testing.T) *insider {
	srv := kurrenttest.Start(t)
	store, err := kurrent.Open(t.Context(), kurrent.Config{URL: srv.DirectURL()})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return &insider{name: "kurrent", store: store, rows: func(t *testing.T, _ bool, f func([]row) []row) {
		srv.Tamper(func(log []kurrenttest.StoredEvent) []kurrenttest.StoredEvent {
			var system []kurrenttest.StoredEvent
			var rows []row
			for _, e := range log {
				if e.Stream[0] == '$' {
					system = append(system, e)
					continue
				}
				meta, prev, hash := unwrapKurrent(t, e.Metadata)
				rows = append(rows, row{RecordedEvent: eventstore.RecordedEvent{StreamID: e.Stream, Version: e.Number, ID: e.ID.String(),
					Type: e.Type, Data: e.Data, Metadata: meta, PrevHash: prev, Hash: hash}, contentType: e.ContentType})
			}
			out := system
			for _, r := range f(rows) {
				ct := r.contentType
				if ct == "" {
					ct = "application/json"
				}
				out = append(out, kurrenttest.StoredEvent{Stream: r.StreamID, Number: r.Version, ID: uuid.MustParse(r.ID), Type: r.Type,
					ContentType: ct, Data: r.Data, Metadata: wrapKurrent(r.Metadata, r.PrevHash, r.Hash)})
			}
			return out
		})
	}}
}

// The KurrentDB store's metadata envelope, as its package doc gives it.
func unwrapKurrent(t *testing.T, stored []byte) (meta, prev, hash []byte) {
	var env struct {
		Metadata json.RawMessage             `json:"metadata"`
		Chain    struct{ Hash, Prev string } `json:"opledger_chain"`
	}
	require.NoError(t, json.Unmarshal(stored, &env))
	prev, err := hex.DecodeString(env.Chain.Prev)
	require.NoError(t, err)
	hash, err = hex.DecodeString(env.Chain.Hash)
	require.NoError(t, err)
	return env.Metadata, prev, hash
}

func wrapKurrent(meta, prev, hash []byte) []byte {
	return fmt.Appendf(nil, `{"metadata":%s,"opledger_chain":{"hash":"%x","prev":"%x"}}`, meta, hash, prev)
}

// onEveryInsider runs f as a parallel subtest per backend.
func onEveryInsider(t *testing.T, f func(t *testing.T, in *insider)) {
	for _, b := range insiders {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.open(t))
		})
	}
}

// readLog reads the whole global log.
func readLog(t *testing.T, store eventstore.Store) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	var after eventstore.Position
	for range 1000 { // bounded: test logs are small
		page, err := store.ReadAll(context.Background(), after, 1000)
		require.NoError(t, err)
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].Position
	}
	t.Fatal("log too long for a test")
	return nil
}

// indexOf is the place of stream@version in log.
func indexOf(t *testing.T, log []eventstore.RecordedEvent, stream string, version int64) int {
	t.Helper()
	i := slices.IndexFunc(log, func(e eventstore.RecordedEvent) bool { return e.StreamID == stream && e.Version == version })
	require.NotEqual(t, -1, i, "%s@%d in the log", stream, version)
	return i
}

// setField returns JSON data with one top-level member set to value (JSON).
func setField(t *testing.T, data []byte, field, value string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &m))
	m[field] = json.RawMessage(value)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

// rehash recomputes the chain of stream in rows from version from on, as
// a careful forger does, and returns the new head hash.
func rehash(t *testing.T, rows []row, stream string, from int64) []byte {
	t.Helper()
	prev := chain.Genesis
	var head []byte
	for i := range rows {
		r := &rows[i]
		if r.StreamID != stream {
			continue
		}
		if r.Version >= from {
			c, err := chain.Content(r.StreamID, r.ID, r.Type, r.Data, r.Metadata)
			require.NoError(t, err)
			h := chain.Link(prev, r.Version, c)
			r.PrevHash, r.Hash = slices.Clone(prev[:]), slices.Clone(h[:])
		}
		copy(prev[:], r.Hash)
		head = r.Hash
	}
	return head
}

// Test digest keys: one that signs, one that does not belong.
var (
	digestSigner = mustSigner(1)
	otherSigner  = mustSigner(2)
)

func mustSigner(b byte) *audit.DigestSigner {
	s, err := audit.NewDigestSigner(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		panic(err)
	}
	return s
}

// digestOf signs a digest of store's whole log.
func digestOf(t *testing.T, store eventstore.Store) *audit.Digest {
	t.Helper()
	d, err := audit.MakeDigest(context.Background(), store, nil, digestSigner, t0.Add(48*time.Hour))
	require.NoError(t, err)
	return roundTrip(t, d)
}

// roundTrip writes a digest and parses it back, as an auditor's copy is.
func roundTrip(t *testing.T, d *audit.Digest) *audit.Digest {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, d.WriteJSON(&b))
	back, err := audit.ParseDigest(&b)
	require.NoError(t, err)
	return back
}

// verifyWith runs Verify with a digest (and a previous one) checked by
// digestSigner's key.
func verifyWith(t *testing.T, store eventstore.Store, d, prev *audit.Digest) audit.Report {
	t.Helper()
	rep, err := audit.Verify(context.Background(), store, audit.VerifyOptions{Digest: d, Previous: prev, DigestKey: digestSigner.DigestVerifier})
	require.NoError(t, err)
	require.True(t, rep.Complete)
	return rep
}

// chainIDs lists the tamper-evidence invariants a report names.
func chainIDs(r audit.Report) []string {
	var ids []string
	for _, id := range invariantIDs(r) {
		if id[0] == 'H' || id[0] == 'D' {
			ids = append(ids, id)
		}
	}
	return ids
}

// xid is a PostgreSQL event's transaction id.
func xid(e eventstore.RecordedEvent) uint64 { return e.Position.(postgres.Position).TransactionID }
