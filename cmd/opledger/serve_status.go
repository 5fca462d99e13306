package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/httpapi"
	"opledger/adapters/pgqueue"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport"
)

// What /readyz and /metrics read beside the API: the roles' states from the
// supervisor, and the relay's lag, the Postgres queue and the set-aside
// items from the database.

// readiness is the part of /readyz that is not a role: the database
// answers and the event store's schema is current.
func readiness(pool *pgxpool.Pool, storeCheck func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := pool.Ping(ctx); err != nil {
			return fmt.Errorf("database: %w", err)
		}
		if err := storeCheck(ctx); err != nil {
			return fmt.Errorf("event store: %w", err)
		}
		return nil
	}
}

// serveStatus wires httpapi.Status for serve: the supervisor's roles, the
// relays' lag (when the relay runs here), the Postgres queue's depth (on the
// Postgres-only transport) and the set-aside counts.
func serveStatus(sup *supervisor, pool *pgxpool.Pool, relays []*transport.Relay, schema string, s serveSettings) (httpapi.Status, error) {
	st := httpapi.Status{Roles: sup.statuses}
	aside, err := pgsetaside.New(pool, schema)
	if err != nil {
		return st, err
	}
	st.SetAside = aside.Counts
	if s.brokers == nil { // the Postgres-only transport: its queue is ours to count
		q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: schema, WorkerID: "serve-metrics"})
		if err != nil {
			return st, err
		}
		st.Queue = func(ctx context.Context) ([]httpapi.QueueDepth, error) {
			depths, err := q.Depth(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]httpapi.QueueDepth, len(depths))
			for i, d := range depths {
				out[i] = httpapi.QueueDepth{Topic: d.Topic, Ready: d.Ready, Hidden: d.Hidden, DeadLetters: d.Dead}
			}
			return out, nil
		}
	}
	if len(relays) > 0 {
		st.RelayLag = func(ctx context.Context) ([]httpapi.RelayLag, error) {
			out := make([]httpapi.RelayLag, len(relays))
			for i, r := range relays {
				lag, err := r.Lag(ctx)
				if err != nil {
					return nil, err
				}
				out[i] = httpapi.RelayLag{Relay: r.Name(), Events: lag.Events, Capped: lag.Capped, Behind: lag.Behind}
			}
			return out, nil
		}
	}
	return st, nil
}

// brokerProbe tells whether any Kafka broker accepts a TCP connection. It
// probes at most once per probeEvery, however often /readyz is asked, and
// each dial is bounded by probeDialTimeout.
type brokerProbe struct {
	brokers []string
	mu      sync.Mutex
	at      time.Time
	last    error
}

const (
	probeEvery       = time.Second
	probeDialTimeout = time.Second
)

func newBrokerProbe(brokers []string) *brokerProbe { return &brokerProbe{brokers: brokers} }

func (p *brokerProbe) check(ctx context.Context) error {
	p.mu.Lock() // held while probing: concurrent checks share one probe
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < probeEvery {
		return p.last
	}
	p.last, p.at = p.probe(ctx), time.Now()
	return p.last
}

func (p *brokerProbe) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeDialTimeout)
	defer cancel()
	errs := make([]error, len(p.brokers))
	var wg sync.WaitGroup
	for i, b := range p.brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", b)
			if err != nil {
				errs[i] = err
				return
			}
			_ = conn.Close()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("cannot reach Kafka (%s): %w", strings.Join(p.brokers, ","), errors.Join(errs...))
}
