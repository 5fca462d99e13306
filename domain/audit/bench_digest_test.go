package audit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// benchCopies is how many copies of the story the digest benchmarks' log
// holds (about 58 events each).
const benchCopies = 200

// storyLog returns a memory store holding benchCopies copies of the story,
// interleaved as bench-audit's seed interleaves them, each event appended
// (and so hashed) by the store.
func storyLog(b *testing.B) (*memory.Store, int64) {
	b.Helper()
	tmpl := memory.New(nil)
	n := newStory(b, tmpl).write()
	events, err := tmpl.ReadAll(context.Background(), nil, int(n))
	if err != nil {
		b.Fatal(err)
	}
	store := memory.New(nil)
	next := map[string]int64{}
	for _, e := range events {
		for c := range benchCopies {
			stream, data := e.StreamID, string(e.Data)
			if op, ok := domain.OperationIDFromStream(e.StreamID); ok {
				suffixed := fmt.Sprintf("%s-%07d", op, c)
				stream, data = domain.OperationID(suffixed).StreamName(), strings.ReplaceAll(data, string(op), suffixed)
			}
			v, seen := next[stream]
			if !seen {
				v = -1
			}
			res, err := store.Append(context.Background(), stream, eventstore.Exact(v), []eventstore.EventData{{ID: uuid.NewString(), Type: e.Type, Data: []byte(data), Metadata: e.Metadata}})
			if err != nil {
				b.Fatal(err)
			}
			next[stream] = res.NextExpectedVersion
		}
	}
	return store, n * benchCopies
}

// BenchmarkVerify measures a whole Verify of an 11,600-event log in
// memory: every invariant and the hash chain, then the same with a digest
// to match (the Merkle tree rebuilt and compared block by block).
func BenchmarkVerify(b *testing.B) {
	store, n := storyLog(b)
	d, err := audit.MakeDigest(context.Background(), store, nil, digestSigner, t0)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts audit.VerifyOptions
	}{
		{"chain-only", audit.VerifyOptions{}},
		{"with-digest", audit.VerifyOptions{Digest: d, DigestKey: digestSigner.DigestVerifier}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				rep, err := audit.Verify(context.Background(), store, bc.opts)
				if err != nil || !rep.OK() {
					b.Fatalf("verify: %v, %d violations", err, rep.ViolationCount)
				}
			}
			b.ReportMetric(float64(int64(b.N)*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkMakeDigest measures signing a digest of the same log from its
// start: every event rehashed, the tree built.
func BenchmarkMakeDigest(b *testing.B) {
	store, n := storyLog(b)
	for b.Loop() {
		if _, err := audit.MakeDigest(context.Background(), store, nil, digestSigner, t0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(int64(b.N)*n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkProve measures proving one operation's history against a
// digest of the same log (one pass over it).
func BenchmarkProve(b *testing.B) {
	store, n := storyLog(b)
	d, err := audit.MakeDigest(context.Background(), store, nil, digestSigner, t0)
	if err != nil {
		b.Fatal(err)
	}
	op := domain.OperationID(fmt.Sprintf("%s-%07d", opThursday, benchCopies/2))
	for b.Loop() {
		if _, err := audit.Prove(context.Background(), store, op, d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(int64(b.N)*n)/b.Elapsed().Seconds(), "events/s")
}
