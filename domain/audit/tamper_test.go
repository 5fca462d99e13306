package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// forgery is one way an insider rewrites history, on the row-level stores
// and in SQL, and what it must be caught as.
type forgery struct {
	name string
	// target picks the event the forgery starts at: its index in the log
	// is where a digest must see the log depart.
	target func(t *testing.T, in *insider, log []eventstore.RecordedEvent) int
	rows   func(t *testing.T, log []row, at int) []row
	sql    func(t *testing.T, in *insider, log []eventstore.RecordedEvent, at int)
	// fixHeads: the forger also moves the memory store's heads.
	fixHeads bool
	// chainOnly are the tamper invariants Verify must name without a
	// digest (nil: none, the forgery is invisible without one); by backend
	// when they differ.
	chainOnly map[string][]string
	// exact: the digest names the very event (else a window around it).
	exact bool
}

var (
	thursday = opThursday.StreamName()
	happy    = opHappy.StreamName()
)

func atVersion(stream string, version int64) func(*testing.T, *insider, []eventstore.RecordedEvent) int {
	return func(t *testing.T, _ *insider, log []eventstore.RecordedEvent) int {
		return indexOf(t, log, stream, version)
	}
}

func lastOf(stream string) func(*testing.T, *insider, []eventstore.RecordedEvent) int {
	return func(t *testing.T, _ *insider, log []eventstore.RecordedEvent) int {
		last := -1
		for i, e := range log {
			if e.StreamID == stream {
				last = i
			}
		}
		return last
	}
}

func everywhere(ids ...string) map[string][]string {
	return map[string][]string{"memory": ids, "postgres": ids, "kurrent": ids}
}

var forgeries = []forgery{
	{
		name:   "change a field",
		target: atVersion(thursday, 0),
		rows: func(t *testing.T, log []row, i int) []row {
			log[i].Data = setField(t, log[i].Data, "amount_minor", "20000")
			return log
		},
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			in.sql(t, `UPDATE events SET data = jsonb_set(data, '{amount_minor}', '20000') WHERE event_id = $1`, log[i].ID)
		},
		chainOnly: everywhere("H1"),
		exact:     true,
	},
	{
		name:   "delete an event",
		target: atVersion(happy, 3),
		rows:   func(t *testing.T, log []row, i int) []row { return slices.Delete(log, i, i+1) },
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			in.sql(t, `DELETE FROM events WHERE event_id = $1`, log[i].ID)
		},
		chainOnly: everywhere("H1"),
	},
	{
		name:   "delete the last event of a stream",
		target: lastOf(domain.EvidenceStreamOf(opThursday)),
		rows:   func(t *testing.T, log []row, i int) []row { return slices.Delete(log, i, i+1) },
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			in.sql(t, `DELETE FROM events WHERE event_id = $1`, log[i].ID)
		},
		// Only a store that records heads apart from the log shows it.
		chainOnly: map[string][]string{"memory": {"H3"}, "postgres": {"H3"}},
		exact:     true, // it is the log's last event: the log ends early
	},
	{
		name:   "insert an event",
		target: atVersion(happy, 2),
		rows: func(t *testing.T, log []row, i int) []row {
			forged := log[i]
			forged.ID = uuid.NewString()
			for k := range log {
				if log[k].StreamID == happy && log[k].Version >= 2 {
					log[k].Version++
				}
			}
			forged.Version = 2
			forged.Data = slices.Clone(forged.Data)
			log = slices.Insert(log, i, forged)
			// A careful forger links the forged event to its predecessor.
			c, err := chain.Content(forged.StreamID, forged.ID, forged.Type, forged.Data, forged.Metadata)
			require.NoError(t, err)
			prev := log[slices.IndexFunc(log, func(r row) bool { return r.StreamID == happy && r.Version == 1 })].Hash
			h := chain.Link(chain.Hash(prev), 2, c)
			log[i].PrevHash, log[i].Hash = prev, h[:]
			return log
		},
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			require.NotEqual(t, xid(log[i-1]), xid(log[i]), "the insertion point starts a transaction")
			in.sql(t, `UPDATE events SET stream_version = stream_version + 1000000 WHERE stream_id = $1 AND stream_version >= 2`, happy)
			in.sql(t, `UPDATE events SET stream_version = stream_version - 999999 WHERE stream_id = $1 AND stream_version >= 1000000`, happy)
			forged := log[i]
			forged.ID = uuid.NewString()
			c, err := chain.Content(forged.StreamID, forged.ID, forged.Type, forged.Data, forged.Metadata)
			require.NoError(t, err)
			prev := log[indexOf(t, log, happy, 1)].Hash
			h := chain.Link(chain.Hash(prev), 2, c)
			// Its transaction id is its predecessor's: it sorts right after it.
			in.sql(t, `INSERT INTO events (transaction_id, stream_id, stream_version, event_id, event_type, data, metadata, prev_hash, event_hash)
				VALUES ($1::text::xid8, $2, 2, $3, $4, $5, $6, $7, $8)`,
				fmt.Sprint(xid(log[i-1])), happy, forged.ID, forged.Type, forged.Data, forged.Metadata, prev, h[:])
		},
		chainOnly: map[string][]string{"memory": {"H1", "H3"}, "postgres": {"H1", "H3"}, "kurrent": {"H1"}},
	},
	{
		name: "reorder two events of different streams",
		target: func(t *testing.T, in *insider, log []eventstore.RecordedEvent) int {
			for i := 5; i+2 < len(log); i++ {
				a, b := log[i], log[i+1]
				if a.StreamID == b.StreamID || a.StreamID == domain.EvidenceStream || b.StreamID == domain.EvidenceStream {
					continue
				}
				if in.name == "postgres" && (xid(log[i-1]) == xid(a) || xid(a) == xid(b) || xid(b) == xid(log[i+2])) {
					continue // each alone in its transaction, so swapping ids swaps just them
				}
				return i
			}
			t.Fatal("no two adjacent events of different streams")
			return 0
		},
		rows: func(t *testing.T, log []row, i int) []row {
			log[i], log[i+1] = log[i+1], log[i]
			return log
		},
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			in.sql(t, `UPDATE events SET transaction_id = CASE WHEN event_id = $1 THEN $3::text::xid8 ELSE $4::text::xid8 END WHERE event_id IN ($1, $2)`,
				log[i].ID, log[i+1].ID, fmt.Sprint(xid(log[i+1])), fmt.Sprint(xid(log[i])))
		},
		chainOnly: nil, // each stream's own order is intact: only a digest sees it
	},
	{
		name:   "reorder two events of one stream",
		target: atVersion(happy, 1),
		rows: func(t *testing.T, log []row, i int) []row {
			j := slices.IndexFunc(log, func(r row) bool { return r.StreamID == happy && r.Version == 2 })
			log[i].Version, log[j].Version = 2, 1
			return log
		},
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			in.sql(t, `UPDATE events SET stream_version = 1000001 WHERE stream_id = $1 AND stream_version = 1`, happy)
			in.sql(t, `UPDATE events SET stream_version = 1 WHERE stream_id = $1 AND stream_version = 2`, happy)
			in.sql(t, `UPDATE events SET stream_version = 2 WHERE stream_id = $1 AND stream_version = 1000001`, happy)
		},
		chainOnly: everywhere("H1"),
		exact:     true, // the stored hash is still the digest's: the version was changed
	},
	{
		name:     "rewrite a whole stream with fresh hashes",
		target:   atVersion(thursday, 0),
		fixHeads: true,
		rows: func(t *testing.T, log []row, i int) []row {
			log[i].Data = setField(t, log[i].Data, "amount_minor", "20000")
			rehash(t, log, thursday, 0)
			return log
		},
		sql: func(t *testing.T, in *insider, log []eventstore.RecordedEvent, i int) {
			in.sql(t, `UPDATE events SET data = jsonb_set(data, '{amount_minor}', '20000') WHERE event_id = $1`, log[i].ID)
			events, err := in.store.ReadStream(context.Background(), thursday, 0, 1000)
			require.NoError(t, err)
			rows := make([]row, len(events))
			for k, e := range events {
				rows[k] = row{RecordedEvent: e}
			}
			head := rehash(t, rows, thursday, 0)
			for _, r := range rows {
				in.sql(t, `UPDATE events SET prev_hash = $2, event_hash = $3 WHERE event_id = $1`, r.ID, r.PrevHash, r.Hash)
			}
			in.sql(t, `UPDATE streams SET head_hash = $2 WHERE stream_id = $1`, thursday, head)
		},
		chainOnly: nil, // consistent: only a digest sees it
	},
}

// TestForgeriesAreCaught forges history each way an insider would, on
// every backend, after an auditor kept a digest: every forgery is caught
// with the digest, at the first event it touched, and the ones a chain can
// show are caught without it.
func TestForgeriesAreCaught(t *testing.T) {
	for _, f := range forgeries {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			onEveryInsider(t, func(t *testing.T, in *insider) {
				n := newStory(t, in.store).write()
				waitVisible(t, in.store, n)
				before := verifyWith(t, in.store, digestOf(t, in.store), nil)
				require.True(t, before.OK(), "the untouched log verifies: %+v", before.Violations)
				d := digestOf(t, in.store)
				log := readLog(t, in.store)
				i := f.target(t, in, log)
				if in.sql != nil {
					f.sql(t, in, log, i)
				} else {
					in.rows(t, f.fixHeads, func(rows []row) []row { return f.rows(t, rows, i) })
				}

				chainOnly, err := audit.Verify(context.Background(), in.store, audit.VerifyOptions{})
				require.NoError(t, err)
				var text bytes.Buffer
				require.NoError(t, chainOnly.WriteText(&text))
				require.Equal(t, f.chainOnly[in.name], chainIDs(chainOnly), "without a digest:\n%s", text.String())

				rep := verifyWith(t, in.store, d, nil)
				text.Reset()
				require.NoError(t, rep.WriteText(&text))
				require.False(t, rep.OK(), text.String())
				require.Contains(t, chainIDs(rep), "D1", text.String())
				require.Len(t, rep.Digests, 1)
				dep := rep.Digests[0].Departure
				require.False(t, rep.Digests[0].Matches)
				require.NotNil(t, dep, text.String())
				require.Equal(t, uint64(i), dep.FromIndex, "the first departure is where the forgery starts:\n%s", text.String())
				require.Equal(t, uint64(i), dep.ToIndex, "a log this small is located to the event:\n%s", text.String())
				require.Equal(t, f.exact, dep.Exact, dep.Message)
				if dep.Stream != "" {
					require.Equal(t, log[i].StreamID, dep.Stream, "the event named is the forged one")
				}
				require.Contains(t, text.String(), "DEPARTS")
			})
		})
	}
}

// TestUntouchedLogMatchesItsDigests: the log matches a digest of itself, a
// later digest extends an earlier one, and both survive a file round trip.
func TestUntouchedLogMatchesItsDigests(t *testing.T) {
	onEveryInsider(t, func(t *testing.T, in *insider) {
		n := newStory(t, in.store).write()
		waitVisible(t, in.store, n)
		first := digestOf(t, in.store)
		require.Equal(t, uint64(n), first.TreeSize)

		h := newHistory(t, in.store, "OP-6001")
		h.start() // more events after the first digest
		waitVisible(t, in.store, n+h.next)
		second := digestOf(t, in.store)
		require.Equal(t, uint64(n+h.next), second.TreeSize)

		rep := verifyWith(t, in.store, second, first)
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		require.True(t, rep.OK(), text.String())
		require.Len(t, rep.Digests, 2)
		require.True(t, rep.Digests[0].Matches)
		require.True(t, rep.Digests[1].Matches)
		require.NotNil(t, rep.Digests[1].Extends)
		require.True(t, *rep.Digests[1].Extends)
		require.NotEmpty(t, rep.Digests[1].ConsistencyProof)
		require.Contains(t, text.String(), "the later digest extends it")
		require.Zero(t, rep.Chain.Unhashed)
		require.Equal(t, rep.Events, rep.Chain.Hashed)
		require.Equal(t, in.heads, rep.Chain.HeadsChecked)
	})
}

// TestDigestOfARewrittenLogDoesNotExtendTheEarlierOne: an insider rewrites
// a stream with fresh hashes after one digest and before the next is made:
// the next digest matches the forged log, and the consistency check shows
// it does not extend the earlier one.
func TestDigestOfARewrittenLogDoesNotExtendTheEarlierOne(t *testing.T) {
	in := openMemoryInsider(t)
	n := newStory(t, in.store).write()
	first := digestOf(t, in.store)
	log := readLog(t, in.store)
	i := indexOf(t, log, thursday, 0)
	in.rows(t, true, func(rows []row) []row {
		rows[i].Data = setField(t, rows[i].Data, "amount_minor", "20000")
		rehash(t, rows, thursday, 0)
		return rows
	})
	h := newHistory(t, in.store, "OP-6001")
	h.start()                       // more events after the first digest
	second := digestOf(t, in.store) // signed over the forged log
	require.Equal(t, uint64(n+h.next), second.TreeSize)

	rep := verifyWith(t, in.store, second, first)
	require.True(t, rep.Digests[0].Matches, "the later digest covers the log as it now is")
	require.False(t, rep.Digests[1].Matches)
	require.NotNil(t, rep.Digests[1].Extends)
	require.False(t, *rep.Digests[1].Extends)
	require.Equal(t, []string{"D1", "D2"}, chainIDs(rep))
	require.Equal(t, uint64(i), rep.Digests[1].Departure.FromIndex)
}

// TestDigesterRefusesABrokenChain: a digest never vouches for an event
// whose content no longer matches its hash.
func TestDigesterRefusesABrokenChain(t *testing.T) {
	in := openMemoryInsider(t)
	newStory(t, in.store).write()
	in.rows(t, false, func(rows []row) []row {
		rows[3].Data = setField(t, rows[3].Data, "approver", `"mallory"`)
		return rows
	})
	_, err := audit.MakeDigest(context.Background(), in.store, nil, digestSigner, t0)
	require.ErrorIs(t, err, audit.ErrChainBroken)
	require.ErrorContains(t, err, "event 3")
}

// TestDigestRefusesAnotherKeyAndEdits: a digest verifies only under its own
// key, and an edited digest is refused.
func TestDigestRefusesAnotherKeyAndEdits(t *testing.T) {
	store := newMemoryStore()
	newStory(t, store).write()
	d := digestOf(t, store)
	require.NoError(t, d.CheckSignature(digestSigner.DigestVerifier))
	require.ErrorIs(t, d.CheckSignature(otherSigner.DigestVerifier), audit.ErrBadSignature)
	_, err := audit.Verify(context.Background(), store, audit.VerifyOptions{Digest: d, DigestKey: otherSigner.DigestVerifier})
	require.ErrorIs(t, err, audit.ErrBadSignature)
	_, err = audit.Verify(context.Background(), store, audit.VerifyOptions{Digest: d})
	require.ErrorContains(t, err, "public key")

	var b bytes.Buffer
	require.NoError(t, d.WriteJSON(&b))
	edited := bytes.Replace(b.Bytes(), []byte(`"tree_size": `+fmt.Sprint(d.TreeSize)), []byte(`"tree_size": `+fmt.Sprint(d.TreeSize-1)), 1)
	_, err = audit.ParseDigest(bytes.NewReader(edited))
	require.ErrorIs(t, err, audit.ErrBadDigest, "its blocks no longer add up to its root")

	retimed := bytes.Replace(b.Bytes(), []byte(d.Time), []byte("2020-01-01T00:00:00Z"), 1)
	back, err := audit.ParseDigest(bytes.NewReader(retimed))
	require.NoError(t, err)
	require.ErrorIs(t, back.CheckSignature(digestSigner.DigestVerifier), audit.ErrBadSignature, "the time is signed")

	extra := bytes.Replace(b.Bytes(), []byte(`"format"`), []byte(`"note": "x", "format"`), 1)
	_, err = audit.ParseDigest(bytes.NewReader(extra))
	require.ErrorIs(t, err, audit.ErrBadDigest, "unknown members are refused")
}

// TestUnhashedEventsAreReported: events stored before hashing began are
// never taken for hashed ones: a violation by default, information when
// allowed, and a digest covers them all the same.
func TestUnhashedEventsAreReported(t *testing.T) {
	in := openMemoryInsider(t)
	n := newStory(t, in.store).write()
	in.rows(t, true, func(rows []row) []row {
		for i := range rows {
			if rows[i].StreamID == thursday {
				rows[i].PrevHash, rows[i].Hash = nil, nil // as written before migration 002
			}
		}
		return rows
	})
	rep := verify(t, in.store, n, audit.VerifyOptions{})
	require.Equal(t, []string{"H2"}, chainIDs(rep))
	require.Equal(t, int64(1), rep.ByInvariant["H2"], "once per stream")
	require.Equal(t, int64(1), rep.Chain.UnhashedStreams)
	require.Positive(t, rep.Chain.Unhashed)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	require.Contains(t, text.String(), "NOT TAMPER-EVIDENT")

	rep = verify(t, in.store, n, audit.VerifyOptions{AllowUnhashed: true})
	require.True(t, rep.OK(), "%+v", rep.Violations)
	require.Positive(t, rep.Chain.Unhashed)

	d := digestOf(t, in.store)
	in.rows(t, true, func(rows []row) []row {
		i := slices.IndexFunc(rows, func(r row) bool { return r.StreamID == thursday })
		rows[i].Data = setField(t, rows[i].Data, "amount_minor", "20000")
		return rows
	})
	rep, err := audit.Verify(context.Background(), in.store, audit.VerifyOptions{Digest: d, DigestKey: digestSigner.DigestVerifier, AllowUnhashed: true})
	require.NoError(t, err)
	require.Equal(t, []string{"D1"}, chainIDs(rep), "a digest protects what the chain cannot")
}

// TestDigestLocatesAForgeryInALargeLog: past 1,024 events a digest holds
// block roots; a forgery is still located exactly when its stored hash was
// left alone, and within one block when it was rewritten.
func TestDigestLocatesAForgeryInALargeLog(t *testing.T) {
	const streams, perStream = 50, 100 // 5,000 events: blocks of 8
	in := openMemoryInsider(t)
	for s := range streams {
		h := newHistory(t, in.store, domain.OperationID(fmt.Sprintf("OP-%d", 7000+s)))
		for range perStream / 2 {
			h.raw("Noted", `{"n":1}`)
			h.raw("Noted", `{"n":2}`)
		}
	}
	d := digestOf(t, in.store)
	require.Equal(t, uint64(streams*perStream), d.TreeSize)
	require.Equal(t, uint(3), d.BlockLevel)
	require.Len(t, d.Blocks, streams*perStream/8)

	const target = 3001
	in.rows(t, false, func(rows []row) []row {
		rows[target].Data = []byte(`{"n":3}`)
		return rows
	})
	rep := verifyWith(t, in.store, d, nil)
	dep := rep.Digests[0].Departure
	require.True(t, dep.Exact, dep.Message)
	require.Equal(t, uint64(target), dep.FromIndex)

	in.rows(t, true, func(rows []row) []row {
		rehash(t, rows, rows[target].StreamID, rows[target].Version)
		return rows
	})
	rep = verifyWith(t, in.store, d, nil)
	dep = rep.Digests[0].Departure
	require.False(t, dep.Exact)
	require.LessOrEqual(t, dep.FromIndex, uint64(target))
	require.GreaterOrEqual(t, dep.ToIndex, uint64(target))
	require.Less(t, dep.ToIndex-dep.FromIndex, uint64(8), "within one block: %s", dep.Message)
}

// TestDigestOfAShortenedLog: events removed from the end of the log are
// named from the first missing one.
func TestDigestOfAShortenedLog(t *testing.T) {
	in := openMemoryInsider(t)
	n := newStory(t, in.store).write()
	d := digestOf(t, in.store)
	in.rows(t, true, func(rows []row) []row { return rows[:n-2] })
	rep := verifyWith(t, in.store, d, nil)
	dep := rep.Digests[0].Departure
	require.NotNil(t, dep)
	require.Equal(t, uint64(n-2), dep.FromIndex)
	require.True(t, dep.Exact, dep.Message)
	require.Contains(t, dep.Message, "removed")
}
