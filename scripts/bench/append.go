package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

func init() {
	groups = append(groups, group{
		title: "append",
		names: []string{"append_1ev_c1", "append_1ev_c4", "append_1ev_c16", "append_10ev_c1", "append_10ev_c16",
			"append_1ev_c1_vs_messagedb", "append_1ev_c16_vs_messagedb"},
		run: runAppend,
	})
}

// storeSchema is the event store schema every figure but the log's uses.
const storeSchema = "bench_store"

// openStore migrates schema (once) and opens a store on it.
func openStore(ctx context.Context, s *settings, schema string, maxConns int32) (*postgres.Store, error) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := postgres.Migrate(ctx, conn, schema); err != nil {
		return nil, err
	}
	return postgres.Open(ctx, postgres.Config{URL: s.url, Schema: schema, MaxConns: maxConns})
}

func openPool(ctx context.Context, s *settings, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// benchEvent is an event the size of a Claimed event's data and metadata.
func benchEvent() eventstore.EventData {
	return eventstore.EventData{
		ID:   uuid.NewString(),
		Type: "Claimed",
		Data: []byte(`{"operation_id":"OP-4471","execution_id":"EXE-4471.1","capability_id":"CAP-4471.1","message_id":"MSG-55A",` +
			`"worker_id":"worker-1","attempt":1,"lease_epoch":1,"lease_expires_at":"2026-11-26T14:03:10Z","idempotency_key":"refund-OP-4471-a1"}`),
		Metadata: []byte(`{"schema_version":1,"correlation_id":"COR-2210","causation_id":"MSG-55A","actor":"worker-1","recorded_at":"2026-11-26T14:02:10Z"}`),
	}
}

// appendRate runs clients goroutines for d, each appending batches of n
// events to a stream of its own at exact versions, and returns appends/s.
func appendRate(ctx context.Context, store *postgres.Store, clients, n int, d time.Duration) (float64, error) {
	var (
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	prefix := uuid.NewString()[:8]
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			stream := fmt.Sprintf("bench-%s-%d", prefix, c)
			expected := eventstore.NoStream()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				events := make([]eventstore.EventData, n)
				for i := range events {
					events[i] = benchEvent()
				}
				res, err := store.Append(ctx, stream, expected, events)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				expected = eventstore.Exact(res.NextExpectedVersion)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

func runAppend(ctx context.Context, s *settings, emit func(figure)) error {
	if err := preparePgbench(ctx, s.url); err != nil {
		return err
	}
	store, err := openStore(ctx, s, storeSchema, 20)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := appendRate(ctx, store, 4, 1, 300*time.Millisecond); err != nil { // warm the pool
		return err
	}
	for _, c := range []struct {
		name          string
		clients, n    int
		script, label string
		goal          string
		peer          bool // beside Message DB's write_message too
	}{
		{"append_1ev_c1", 1, 1, pgbenchInsert1, "pgbench 1-row insert c1", "ratio >= 0.8", true},
		{"append_1ev_c4", 4, 1, pgbenchInsert1, "pgbench 1-row insert c4", "", false},
		{"append_1ev_c16", 16, 1, pgbenchInsert1, "pgbench 1-row insert c16", "ratio >= 1.0", true},
		{"append_10ev_c1", 1, 10, pgbenchInsert10, "pgbench 10-row insert c1", "ratio >= 0.8", false},
		{"append_10ev_c16", 16, 10, pgbenchInsert10, "pgbench 10-row insert c16", "ratio >= 0.8", false},
	} {
		peerName := c.name + "_vs_messagedb"
		if !s.wants(c.name, peerName) {
			continue
		}
		fs := []func(ctx context.Context) (float64, error){
			func(ctx context.Context) (float64, error) { return appendRate(ctx, store, c.clients, c.n, s.sample) },
			func(ctx context.Context) (float64, error) { return pgbench(ctx, s, c.script, c.clients, s.sample) },
		}
		peer := c.peer && s.mdbURL != ""
		if peer {
			fs = append(fs, func(ctx context.Context) (float64, error) { return messageDBRate(ctx, s, c.clients, s.sample) })
		}
		var gs groupSize
		gs.since(store)
		all, err := interleaveN(ctx, s.rounds, fs...)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		f := rateFigure(c.name, "ops/s", c.label, c.goal, all[0], all[1])
		f.note = fmt.Sprintf("%.1f appends per statement", gs.since(store))
		emit(f)
		switch {
		case peer:
			p := rateFigure(peerName, "ops/s", fmt.Sprintf("Message DB write_message c%d", c.clients), "ratio >= 1.25", all[0], all[2])
			p.note = messageDBGuarantees
			emit(p)
		case c.peer:
			emit(figure{Figure: peerName, Unit: "error", note: "Message DB is not installed (scripts/bench.sh installs it from npm: is npm on PATH?)"})
		}
	}
	return nil
}

// groupSize is the mean appends per statement since the last call.
type groupSize struct{ st, ap int64 }

func (g *groupSize) since(store *postgres.Store) float64 {
	st, ap := store.GroupCommitStats()
	ds, da := st-g.st, ap-g.ap
	g.st, g.ap = st, ap
	if ds == 0 {
		return 0
	}
	return float64(da) / float64(ds)
}
