package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// Compare BenchmarkAppend's single-client figures with the machine's
// single-row insert rate from scripts/pgbench-insert.sh: an append is one
// statement and one commit, so the ratio shows what the CTE costs on top.

// openBenchStore opens a store with maxConns connections on a fresh,
// migrated schema.
func openBenchStore(b *testing.B, maxConns int32) *postgres.Store {
	b.Helper()
	url, schema := pgtest.Schema(b)
	conn, err := pgx.Connect(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(b.Context()))
	if _, err := postgres.Migrate(b.Context(), conn, schema); err != nil {
		b.Fatal(err)
	}
	store, err := postgres.Open(b.Context(), postgres.Config{URL: url, Schema: schema, MaxConns: maxConns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(store.Close)
	return store
}

func oneEvent() []eventstore.EventData {
	return []eventstore.EventData{{
		ID:       uuid.NewString(),
		Type:     "Claimed",
		Data:     []byte(`{"operation_id":"OP-4471","execution_id":"EXE-1","lease_epoch":1}`),
		Metadata: []byte(`{"correlation_id":"COR-2210","actor":"worker-1"}`),
	}}
}

// BenchmarkAppend measures one client appending one event per call: to a
// fresh stream each time (NoStream: inserts the streams row), and to one
// stream (Exact: updates it).
func BenchmarkAppend(b *testing.B) {
	store := openBenchStore(b, 2)
	ctx := b.Context()
	b.Run("NoStream-fresh-stream", func(b *testing.B) {
		prefix := uuid.NewString()[:8]
		i := 0
		for b.Loop() {
			if _, err := store.Append(ctx, fmt.Sprintf("bench-%s-%d", prefix, i), eventstore.NoStream(), oneEvent()); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
	b.Run("Exact-same-stream", func(b *testing.B) {
		stream := "bench-" + uuid.NewString()[:8]
		expected := eventstore.NoStream()
		for b.Loop() {
			res, err := store.Append(ctx, stream, expected, oneEvent())
			if err != nil {
				b.Fatal(err)
			}
			expected = eventstore.Exact(res.NextExpectedVersion)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
}

// BenchmarkAppendParallel measures concurrent appends, one event each, every
// goroutine to streams of its own (no version conflicts): what group commit
// makes of many clients.
func BenchmarkAppendParallel(b *testing.B) {
	const parallelism = 4 // goroutines per GOMAXPROCS
	store := openBenchStore(b, 16)
	ctx := b.Context()
	var worker atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		stream := fmt.Sprintf("bench-%s-%d", uuid.NewString()[:8], worker.Add(1))
		expected := eventstore.NoStream()
		for pb.Next() {
			res, err := store.Append(ctx, stream, expected, oneEvent())
			if err != nil {
				b.Error(err)
				return
			}
			expected = eventstore.Exact(res.NextExpectedVersion)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkReadAll measures reading a 10,000-event log from the start in
// pages of 500, as a catching-up projection does.
func BenchmarkReadAll(b *testing.B) {
	const (
		total    = 10_000
		pageSize = 500
	)
	store := openBenchStore(b, 2)
	ctx := b.Context()
	for i := range total / eventstore.MaxAppendBatch {
		batch := make([]eventstore.EventData, eventstore.MaxAppendBatch)
		for j := range batch {
			batch[j] = oneEvent()[0]
		}
		if _, err := store.Append(ctx, fmt.Sprintf("bench-read-%d", i%3), eventstore.Any(), batch); err != nil {
			b.Fatal(err)
		}
	}
	readAll := func() int {
		var after eventstore.Position
		n := 0
		for range total/pageSize + 2 { // bounded
			page, err := store.ReadAll(ctx, after, pageSize)
			if err != nil {
				b.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			n += len(page)
			after = page[len(page)-1].Position
		}
		return n
	}
	// Another test's open transaction can hold readers back: wait, bounded,
	// until the whole log is visible before timing.
	visible := false
	for range 1000 { // about 10 s
		if readAll() == total {
			visible = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !visible {
		b.Fatalf("the %d seeded events never became visible", total)
	}
	for b.Loop() {
		if n := readAll(); n != total {
			b.Fatalf("read %d events, want %d", n, total)
		}
	}
	b.ReportMetric(float64(b.N*total)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendHashing measures what the hash chain costs an append: one
// client appending to one stream at exact versions, with the chain (the
// store's Append: content digests in Go, the chain folded in the statement)
// and without it (the statement as it was before migration 002), for one
// event and for a batch of ten.
func BenchmarkAppendHashing(b *testing.B) {
	store := openBenchStore(b, 2)
	ctx := b.Context()
	for _, n := range []int{1, 10} {
		batch := func() []eventstore.EventData {
			out := make([]eventstore.EventData, n)
			for i := range out {
				out[i] = oneEvent()[0]
			}
			return out
		}
		b.Run(fmt.Sprintf("events=%d/hashed", n), func(b *testing.B) {
			stream := "bench-" + uuid.NewString()[:8]
			res, err := store.Append(ctx, stream, eventstore.NoStream(), batch())
			if err != nil {
				b.Fatal(err)
			}
			v := res.NextExpectedVersion
			for b.Loop() {
				res, err := store.Append(ctx, stream, eventstore.Exact(v), batch())
				if err != nil {
					b.Fatal(err)
				}
				v = res.NextExpectedVersion
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
		b.Run(fmt.Sprintf("events=%d/unhashed", n), func(b *testing.B) {
			stream := "bench-" + uuid.NewString()[:8]
			res, err := store.Append(ctx, stream, eventstore.NoStream(), batch())
			if err != nil {
				b.Fatal(err)
			}
			v := res.NextExpectedVersion
			for b.Loop() {
				if v, err = store.AppendUnhashed(ctx, stream, v, batch()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
