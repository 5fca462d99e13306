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
	"opledger/adapters/transport"
	"opledger/domain/clock"
	"opledger/eventstore"
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

// serveStatus wires httpapi.Status for serve.
func serveStatus(sup *supervisor, pool *pgxpool.Pool, store eventstore.Store, tf *transportFlags, s serveSettings, clk clock.Clock) (httpapi.Status, error) {
	st := httpapi.Status{Roles: sup.statuses}
	aside, err := pgqueue.NewSetAside(pool, tf.schema)
	if err != nil {
		return st, err
	}
	st.SetAside = aside.Counts
	if s.brokers == nil { // the Postgres-only transport: its queue is ours to count
		st.Queue = func(ctx context.Context) ([]httpapi.QueueDepth, error) {
			stats, err := pgqueue.Stats(ctx, pool, tf.schema, 0)
			if err != nil {
				return nil, err
			}
			out := make([]httpapi.QueueDepth, len(stats))
			for i, t := range stats {
				out[i] = httpapi.QueueDepth{Topic: t.Topic, Ready: t.Ready, DeadLetters: t.Dead}
			}
			return out, nil
		}
	}
	if !s.disabled["relay"] {
		checks, err := pgqueue.NewCheckpoints(pool, tf.schema)
		if err != nil {
			return st, err
		}
		st.RelayLag = func(ctx context.Context) ([]httpapi.RelayLag, error) {
			return relayLags(ctx, store, checks, clk.Now())
		}
	}
	return st, nil
}

// maxRelayLagCount bounds the events one relay-lag measure reads.
const maxRelayLagCount = 10_000

// relayLags measures each standard relay's checkpoint against the log: the
// events after it (up to maxRelayLagCount) and the age of the first.
func relayLags(ctx context.Context, store eventstore.Store, checks *pgqueue.Checkpoints, now time.Time) ([]httpapi.RelayLag, error) {
	var out []httpapi.RelayLag
	for _, name := range []string{transport.RelayRefundRequests, transport.RelaySecuritySignals} {
		lag, err := relayLag(ctx, store, checks, name, now)
		if err != nil {
			return nil, err
		}
		out = append(out, lag)
	}
	return out, nil
}

// header is implemented by stores that know the position of the last event
// ReadAll can return (postgres.Store): a caught-up relay costs no read.
type header interface {
	Head(ctx context.Context) (eventstore.Position, error)
}

func relayLag(ctx context.Context, store eventstore.Store, checks *pgqueue.Checkpoints, name string, now time.Time) (httpapi.RelayLag, error) {
	lag := httpapi.RelayLag{Relay: name}
	text, err := checks.Load(ctx, name)
	if err != nil {
		return lag, err
	}
	var after eventstore.Position
	if text != "" {
		if after, err = store.ParsePosition(text); err != nil {
			return lag, fmt.Errorf("relay %s checkpoint: %w", name, err)
		}
	}
	if h, ok := store.(header); ok {
		head, err := h.Head(ctx)
		if err != nil {
			return lag, fmt.Errorf("relay lag: head: %w", err)
		}
		if head == nil || head.Compare(after) <= 0 {
			return lag, nil
		}
	}
	for lag.Events < maxRelayLagCount { // bounded: a relay far behind is "at least" this much
		page, err := store.ReadAll(ctx, after, int(min(1000, maxRelayLagCount-lag.Events)))
		if err != nil {
			return lag, fmt.Errorf("relay lag: %w", err)
		}
		if len(page) == 0 {
			return lag, nil
		}
		if lag.Events == 0 {
			lag.Behind = max(0, now.Sub(page[0].RecordedAt))
		}
		lag.Events += int64(len(page))
		after = page[len(page)-1].Position
	}
	lag.Capped = true
	return lag, nil
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
