// Package transporttest is the transport conformance suite and its rig.
// Run(t, features, newTransport) runs the contract every transport keeps
// (transport.Source, Publisher, DeadLetterQueue, with the relay and the
// worker's inbox) against one transport; adapters/kafka and
// adapters/pgqueue pass it, each with a constructor and the Features that
// state their real differences, in watermill's manner. The Rig wires a
// refund world (adapters/harness: the ledger on a real Postgres store, the
// provider simulator over HTTP) to the transport's pieces: relays with
// checkpoints in a fresh transport schema, dispatchers for named workers,
// and a recorder of every disposition. Assertions about effects go to the
// simulator's ledger (Once, Counters), never to a status flag alone.
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// WaitTimeout bounds every Wait.
const WaitTimeout = 20 * time.Second

// Rig is one refund world with the transport's Postgres state beside it.
type Rig struct {
	T      testing.TB
	World  *harness.World
	Store  eventstore.Store
	Pool   *pgxpool.Pool // the transport schema's database
	Schema string        // the transport schema, migrated
	Checks *pgstate.Checkpoints
	// SetAside is the transport schema's set-aside store (relay and Kafka
	// consumer failures).
	SetAside *pgsetaside.Store

	mu      sync.Mutex
	records []Record
	changed chan struct{} // closed and replaced whenever a record is added
}

// Record is one message handled by a recording HandleFunc.
type Record struct {
	Worker      string
	Origin      transport.Origin
	MessageID   domain.MessageID
	OperationID domain.OperationID
	Disposition transport.Disposition
	At          time.Time // when the handler returned (wall clock)
}

// New builds a rig for t on fresh Postgres schemas.
func New(t testing.TB) *Rig {
	t.Helper()
	store := pgtest.OpenStore(t)
	w, err := harness.New(harness.Options{Store: store})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgstate.Migrate(t.Context(), pool, schema)
	require.NoError(t, err)
	checks, err := pgstate.NewCheckpoints(pool, schema)
	require.NoError(t, err)
	sa, err := pgsetaside.New(pool, schema)
	require.NoError(t, err)
	return &Rig{T: t, World: w, Store: store, Pool: pool, Schema: schema, Checks: checks, SetAside: sa, changed: make(chan struct{})}
}

// Approve requests, decides and issues a capability for op (the refund
// API's part): the relay then finds a CapabilityIssued in the log.
func (r *Rig) Approve(op domain.OperationID) harness.Refund {
	r.T.Helper()
	ref, err := r.World.Approve(r.T.Context(), op, "ORD-"+string(op), 12000)
	require.NoError(r.T, err)
	return ref
}

// Corrupt appends an event of a type no build knows to op's stream: every
// command on op then fails to load it (ledger.ErrCorruptStream), which is
// neither bad input nor an outage. The relays ignore the event (no selector
// reads its type), so op's request is still published: a poisoned
// operation among healthy ones.
func (r *Rig) Corrupt(op domain.OperationID) {
	r.T.Helper()
	_, err := r.Store.Append(r.T.Context(), op.StreamName(), eventstore.Any(), []eventstore.EventData{{
		ID: uuid.NewString(), Type: "TestPoison", Data: []byte(`{"poison":true}`), Metadata: []byte(`{}`),
	}})
	require.NoError(r.T, err)
}

// Counters is the simulator's ledger for op.
func (r *Rig) Counters(op domain.OperationID) sim.Counters {
	return r.World.Sim.Ledger().ByOperation[string(op)]
}

// Handler returns a recording HandleFunc for a worker named id on the
// world's ledger and provider.
func (r *Rig) Handler(id string) transport.HandleFunc {
	r.T.Helper()
	wk, err := r.World.Worker(id)
	require.NoError(r.T, err)
	d, err := transport.NewDispatcher(transport.DispatcherConfig{
		Worker: wk, Evidence: r.World.Ledger, WorkerID: id, Clock: r.World.Clock, Logger: r.World.Logger,
	})
	require.NoError(r.T, err)
	return r.Record(id, d.Handle)
}

// Record wraps handle so that every disposition is recorded under worker.
func (r *Rig) Record(worker string, handle transport.HandleFunc) transport.HandleFunc {
	return func(ctx context.Context, in transport.Inbound) transport.Disposition {
		d := handle(ctx, in)
		req, _ := transport.DecodeRefundRequest(in.Value)
		r.mu.Lock()
		r.records = append(r.records, Record{Worker: worker, Origin: in.Origin, MessageID: req.MessageID, OperationID: req.OperationID, Disposition: d, At: time.Now()})
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		return d
	}
}

// Records returns a copy of what was handled so far.
func (r *Rig) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Find returns the records that match.
func (r *Rig) Find(match func(Record) bool) []Record {
	var out []Record
	for _, rec := range r.Records() {
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// WaitRecords waits until at least n records match, woken by each new
// record, for at most WaitTimeout.
func (r *Rig) WaitRecords(what string, n int, match func(Record) bool) []Record {
	r.T.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if got := r.Find(match); len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.T.Fatalf("waited %s for %d records of %s; have %d: %+v", WaitTimeout, n, what, len(r.Find(match)), r.Records())
		}
	}
}

// Poll calls cond every 5ms until it holds, for at most WaitTimeout: for
// conditions no signal announces (a topic's contents).
func (r *Rig) Poll(what string, cond func() bool) {
	r.T.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			r.T.Fatalf("waited %s for %s", WaitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a bound, not waiting for time to pass
	}
}

// Relay builds a relay named name on the world's store and the rig's
// checkpoints (or checks, when given), publishing what sel selects, with
// failed events kept in the rig's set-aside store (SetAside).
func (r *Rig) Relay(name string, pub transport.Publisher, sel transport.Selector, checks transport.Checkpoints) *transport.Relay {
	r.T.Helper()
	return r.RelayWith(name, pub, sel, checks, nil)
}

// RelayWith is Relay with tune applied to the configuration first.
func (r *Rig) RelayWith(name string, pub transport.Publisher, sel transport.Selector, checks transport.Checkpoints, tune func(*transport.RelayConfig)) *transport.Relay {
	r.T.Helper()
	if checks == nil {
		checks = r.Checks
	}
	cfg := transport.RelayConfig{
		Name: name, Store: r.Store, Checkpoints: checks, Publisher: pub, Select: sel, Logger: r.World.Logger,
		Clock: r.World.Clock, SetAside: r.SetAside,
		PollMax: 50 * time.Millisecond, FailureBackoff: 10 * time.Millisecond, MaxFailures: 20,
		Policy: setaside.Policy{MaxAttempts: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
	}
	if tune != nil {
		tune(&cfg)
	}
	rl, err := transport.NewRelay(cfg)
	require.NoError(r.T, err)
	return rl
}

// Go runs f until the test ends (or stop is called) and fails the test if f
// returns anything but context.Canceled. stop waits for f to return.
func (r *Rig) Go(name string, f func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.T.Context()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
			r.T.Errorf("%s: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	r.T.Cleanup(stop)
	return stop
}

// Evidence returns the unattributed evidence recorded so far (today's
// stream, by the world's clock).
func (r *Rig) Evidence() []domain.PresentationRejected {
	r.T.Helper()
	events, err := r.Store.ReadStream(r.T.Context(), domain.UnattributedStreamFor(r.World.Clock.Now()), 0, 10_000)
	require.NoError(r.T, err)
	var out []domain.PresentationRejected
	for _, rec := range events {
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(r.T, err)
		e := dec.Event
		if pr, ok := e.(domain.PresentationRejected); ok {
			out = append(out, pr)
		}
	}
	return out
}

// OperationEvidence returns op's recorded refusals.
func (r *Rig) OperationEvidence(op domain.OperationID) []domain.PresentationRejected {
	r.T.Helper()
	ev, err := r.World.Evidence(r.T.Context(), op)
	require.NoError(r.T, err)
	return ev
}

// CrashAfterPublish models a relay that dies after publishing and before
// saving its checkpoint, n times: the Checkpoints it returns fail a Save
// whenever the Publisher it returns published since the last Save.
func CrashAfterPublish(pub transport.Publisher, checks transport.Checkpoints, n int) (transport.Publisher, transport.Checkpoints) {
	c := &crash{Publisher: pub, Checkpoints: checks, fails: n}
	return publishSide{c}, c
}

type crash struct {
	transport.Publisher
	transport.Checkpoints
	mu        sync.Mutex
	fails     int
	published bool
}

type publishSide struct{ c *crash }

func (p publishSide) Publish(ctx context.Context, msgs []transport.Outbound) error {
	err := p.c.Publisher.Publish(ctx, msgs)
	if err == nil {
		p.c.mu.Lock()
		p.c.published = true
		p.c.mu.Unlock()
	}
	return err
}

// Save fails after a publication while failures remain, else saves.
func (c *crash) Save(ctx context.Context, name, position string) error {
	c.mu.Lock()
	fail := c.published && c.fails > 0
	if fail {
		c.fails--
	}
	c.published = false
	c.mu.Unlock()
	if fail {
		return fmt.Errorf("checkpoint %s at %s: simulated crash after publishing", name, position)
	}
	return c.Checkpoints.Save(ctx, name, position)
}
