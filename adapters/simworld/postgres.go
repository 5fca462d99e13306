package simworld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

// PostgresStores is a StoreFactory on the PostgreSQL server at url: every
// schedule gets a fresh, migrated schema of its own (sim_<random>), dropped
// when the schedule ends. Close the returned func when the sweep is done.
//
// On PostgreSQL a schedule checks the same invariants, more slowly. A
// reader of the global log sees an event only once every older transaction
// of the cluster has ended (see eventstore/postgres), and another session's
// transaction (another test's, on a shared server) would make a relay read
// nothing although the schedule committed events, and the world judge it
// caught up: a schedule's ReadAll waits until it shows every event the
// schedule committed (heldBackStore). Its trace is reproducible only while
// nothing else holds a transaction open on the server for longer than
// visibleWait.
func PostgresStores(ctx context.Context, url string) (StoreFactory, func(), error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", postgres.RedactURL(url), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("connect %s: %w", postgres.RedactURL(url), err)
	}
	factory := func(ctx context.Context) (eventstore.Store, func(), error) {
		var b [6]byte
		_, _ = rand.Read(b[:])
		schema := "sim_" + hex.EncodeToString(b[:])
		ident := pgx.Identifier{schema}.Sanitize()
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
			return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
		}
		drop := func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+ident+" CASCADE") }
		if _, err := postgres.Migrate(ctx, pool, schema); err != nil {
			drop()
			return nil, nil, fmt.Errorf("migrate %s: %w", schema, err)
		}
		store, err := postgres.New(pool, schema)
		if err != nil {
			drop()
			return nil, nil, err
		}
		return &heldBackStore{Store: store, pool: pool, pending: "SELECT EXISTS (SELECT 1 FROM " + ident +
			".events WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint))"}, drop, nil
	}
	return factory, pool.Close, nil
}

// heldBackStore is a schedule's PostgreSQL store whose ReadAll shows every
// event committed before it was called: when a page comes back short while
// the events table holds committed events after it (another session's open
// transaction holds the log back), it reads again every 10 ms, for at most
// visibleWait, then answers what it read. The world runs one step at a
// time, so nothing of the schedule's own is in flight during a read.
type heldBackStore struct {
	*postgres.Store
	pool    *pgxpool.Pool
	pending string // whether the events table holds events after $1/$2
}

func (s *heldBackStore) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	deadline := time.Now().Add(visibleWait)
	for {
		page, err := s.Store.ReadAll(ctx, after, limit)
		if err != nil || len(page) >= limit || time.Now().After(deadline) {
			return page, err
		}
		last, _ := after.(postgres.Position) // nil: the start of the log
		if len(page) > 0 {
			last, _ = page[len(page)-1].Position.(postgres.Position)
		}
		var held bool
		if err := s.pool.QueryRow(ctx, s.pending, last.TransactionID, last.GlobalPosition).Scan(&held); err != nil || !held {
			return page, err
		}
		select { // another transaction of the cluster holds the log back: poll, bounded by visibleWait
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
