// Package storetest is the conformance suite every eventstore.Store backend
// passes. A backend's test calls Run with a constructor for fresh, empty
// stores and the options its capabilities allow:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) eventstore.Store { return memory.New(nil) },
//			storetest.WithOutage(...))
//	}
//
// Every sub-test runs in parallel and takes its own store from newStore, so
// newStore must return an isolated store (a fresh schema, a new instance)
// that it cleans up itself. The suite never sleeps to wait for a condition:
// it waits on channels, or polls with a bound where a backend may legitimately
// delay visibility (Postgres readers wait for every older transaction in the
// cluster to end).
package storetest

import (
	"context"
	"testing"
	"time"

	"opledger/eventstore"
)

// Bounds on waiting. They are generous: they exist so a broken backend fails
// the test instead of hanging it, not to measure speed.
const (
	// callBound bounds each test's context.
	callBound = 2 * time.Minute
	// visibleBound bounds waiting for committed events to become visible to
	// ReadAll (another transaction in the cluster may hold readers back).
	visibleBound = 30 * time.Second
	// unavailableBound bounds how long a call may take to report that the
	// store went away.
	unavailableBound = 15 * time.Second
)

// HoldOpenAppendFunc appends events to stream on s (expected version Any) and
// leaves the append uncommitted: the events take their place in the global
// order now, but are not committed until commit is called. A backend whose
// appends can commit out of global order (Postgres) provides it, so the suite
// can prove readers never skip such an event.
type HoldOpenAppendFunc func(ctx context.Context, s eventstore.Store, stream string, events []eventstore.EventData) (commit func() error, err error)

// ReopenFunc returns another instance of store s on the same data, with
// resources of its own (Postgres: its own connection pool), closed by the
// function's own cleanup.
type ReopenFunc func(t *testing.T, s eventstore.Store) eventstore.Store

// Outage is one way a store goes away.
type Outage struct {
	// Name names the sub-test, e.g. "server-gone".
	Name string
	// Start returns a store and a function that takes it away. Every call
	// after takeDown returns must fail, within a bounded time, with an error
	// wrapping eventstore.ErrUnavailable.
	Start func(t *testing.T) (s eventstore.Store, takeDown func())
	// WorksBefore says the store from Start works until takeDown is called
	// (the suite then proves it does); false for a store unreachable from
	// the start.
	WorksBefore bool
}

// Option adds a backend capability to Run.
type Option func(*config)

type config struct {
	reopen   ReopenFunc
	holdOpen HoldOpenAppendFunc
	outages  []Outage
}

// WithReopen lets the concurrency tests give each racing goroutine its own
// store instance (and so, for Postgres, its own connection). Without it they
// share the store from newStore.
func WithReopen(f ReopenFunc) Option { return func(c *config) { c.reopen = f } }

// WithHoldOpenAppend enables the commit-order test; without it that test is
// skipped (the backend has no way to hold an append open).
func WithHoldOpenAppend(f HoldOpenAppendFunc) Option { return func(c *config) { c.holdOpen = f } }

// WithOutage adds a way for the store to go away to the unavailability
// tests. Without any, they are skipped.
func WithOutage(o Outage) Option { return func(c *config) { c.outages = append(c.outages, o) } }

// Run runs the conformance suite. newStore returns a fresh, empty store for
// one sub-test and registers its own cleanup.
func Run(t *testing.T, newStore func(t *testing.T) eventstore.Store, opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	s := suite{newStore: newStore, cfg: cfg}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Append/Any", s.appendAny},
		{"Append/NoStream", s.appendNoStream},
		{"Append/Exact", s.appendExact},
		{"Append/ExactNoStreamVersion", s.appendExactNoStreamVersion},
		{"Append/OffByOne", s.appendOffByOne},
		{"Append/RefusedWritesNothing", s.appendRefusedWritesNothing},
		{"Append/Batch", s.appendBatch},
		{"Append/Invalid", s.appendInvalid},
		{"Append/IdempotentRetry", s.appendIdempotentRetry},
		{"Append/RetryRefused", s.appendRetryRefused},
		{"Append/Fenced", s.appendFenced},
		{"Append/FencedRacing", s.appendFencedRacing},
		{"Append/RaceExact", s.raceExact},
		{"Append/RaceNoStream", s.raceNoStream},
		{"Append/RaceAny", s.raceAny},
		{"Append/ConcurrentIsolation", s.appendIsolation},
		{"ReadStream/Basics", s.readStreamBasics},
		{"ReadStream/TenThousand", s.readStreamTenThousand},
		{"ReadStream/RoundTrip", s.readRoundTrip},
		{"ReadAll/PagingCheckpoints", s.readAllPaging},
		{"ReadAll/Positions", s.readAllPositions},
		{"ReadAll/StreamOrder", s.readAllStreamOrder},
		{"ReadAll/CommitOrder", s.readAllCommitOrder},
		{"Chain/Links", s.chainLinks},
		{"Chain/Retry", s.chainRetry},
		{"Chain/Canonical", s.chainCanonical},
		{"Follow/CatchUp", s.followCatchUp},
		{"Context/Cancelled", s.contextCancelled},
		{"Unavailable", s.unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

type suite struct {
	newStore func(t *testing.T) eventstore.Store
	cfg      config
}
