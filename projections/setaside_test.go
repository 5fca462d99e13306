package projections_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport/pgstate"
	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// pgSetAside returns the PostgreSQL set-aside store in a transport schema of
// the test's own.
func (e *env) pgSetAside() *pgsetaside.Store {
	e.t.Helper()
	_, schema := pgtest.Schema(e.t)
	_, err := pgstate.Migrate(e.t.Context(), e.pool, schema)
	require.NoError(e.t, err)
	s, err := pgsetaside.New(e.pool, schema)
	require.NoError(e.t, err)
	return s
}

// appendRaw writes an event straight into the store, past the command
// handler: how a bug, a newer binary or tampering leaves an event this
// binary cannot decode or fold.
func (e *env) appendRaw(stream, typ string, data []byte) string {
	e.t.Helper()
	meta, err := codec.EncodeMetadata(domain.Metadata{Actor: "tamperer", RecordedAt: e.clock.Now()}, 1)
	require.NoError(e.t, err)
	id := uuid.NewString()
	_, err = e.store.Append(e.t.Context(), stream, eventstore.Any(), []eventstore.EventData{{ID: id, Type: typ, Data: data, Metadata: meta}})
	require.NoError(e.t, err)
	return id
}

func (e *env) appendDecided(op domain.OperationID) string {
	e.t.Helper()
	enc, err := codec.Encode(domain.Decided{DecisionID: domain.DecisionID("DEC-" + string(op)), Verdict: domain.Allowed,
		Approver: "agent-7", Attempt: 1, KeyPolicy: domain.KeyPerAttempt, DecidedAt: e.clock.Now()}, domain.Metadata{})
	require.NoError(e.t, err)
	return e.appendRaw(op.StreamName(), enc.Type, enc.Data)
}

// failures collects what OnItemFailure reports.
type failures struct {
	mu    sync.Mutex
	items []setaside.Item
}

func (f *failures) observe(it setaside.Item) {
	f.mu.Lock()
	f.items = append(f.items, it)
	f.mu.Unlock()
}

func (f *failures) of(item string) []setaside.Item {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []setaside.Item
	for _, it := range f.items {
		if it.Item == item {
			out = append(out, it)
		}
	}
	return out
}

// One poisoned operation among healthy ones: an event that cannot be
// decoded, and an operation whose first event cannot be decoded (so its
// later events cannot be folded). The projector never stops: it tries each
// poisoned event Policy.MaxAttempts times, sets it aside with its reason
// (visible in the set-aside store), skips it with the checkpoint moving
// past, marks the operation incomplete, and projects every later event.
// Streams the read models do not know are read past, counted, and change
// nothing.
func TestPoisonedEventsSetAsideAndSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := e.pgSetAside()
	seen := &failures{}

	e.request("OP-1", 1_000)
	e.appendRaw("outbox-kafka", "Relayed", []byte(`{}`))
	require.Equal(t, int64(2), e.catchUp(), "a foreign stream's event is counted and changes nothing")

	bogus := e.appendRaw("operation-OP-1", "Bogus", []byte(`{}`)) // undecodable: unknown type
	afterBogus := e.appendDecided("OP-1")                         // folds: OP-1 exists
	garbled := e.appendRaw("operation-OP-3", domain.TypeOperationRequested, []byte(`{"operation_id":17}`))
	follows := e.appendDecided("OP-3") // cannot be folded: OP-3 was never requested in the read models
	healthy := e.request("OP-2", 2_000)
	x := healthy.execute("MSG-2")

	p := e.projector(func(c *projections.Config) { c.SetAside, c.OnItemFailure = store, seen.observe })
	e.start(p)
	e.waitCaughtUp(e.schema)
	// A set-aside is recorded after the batch that skipped the event
	// commits: the checkpoint can be seen before the last one; and
	// OnItemFailure is told after the store holds it.
	waitFor(t, "three events set aside, each told", func() bool {
		aside, err := store.List(t.Context(), setaside.Query{Role: setaside.RoleProjector, SetAsideOnly: true})
		return err == nil && len(aside) == 3 && len(seen.of(follows)) == 1
	})
	select {
	case <-p.Done():
		t.Fatal("the projector stopped on a poisoned event")
	default:
	}

	// The healthy operation is projected in full.
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-2' AND state = 'Executing' AND NOT projection_incomplete`))
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.executions WHERE id = $1 AND state = 'Executing'`, string(x)))
	// The poisoned one is marked, and what could be folded after the
	// skipped event was.
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-1' AND projection_incomplete AND verdict = 'Allowed'`))
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-3'`))
	require.Equal(t, int64(3), e.count(e.schema, `SELECT count(*) FROM %s.skipped_events`))
	for id, reason := range map[string]string{bogus: projections.ReasonEventUndecodable, garbled: projections.ReasonEventUndecodable, follows: projections.ReasonFollowsSkipped} {
		require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.skipped_events WHERE event_id = $1 AND reason = $2 AND detail <> ''`, id, reason), id)
	}
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.skipped_events WHERE event_id = $1`, afterBogus))

	// Each undecodable event was tried MaxAttempts times, then set aside
	// with its reason; the follower was set aside at once.
	for _, id := range []string{bogus, garbled} {
		tries := seen.of(id)
		require.Len(t, tries, fastPolicy.MaxAttempts, id)
		for i, it := range tries {
			require.Equal(t, i+1, it.Attempts)
			require.Equal(t, i+1 == fastPolicy.MaxAttempts, it.SetAside)
		}
	}
	require.Len(t, seen.of(follows), 1)
	listed, err := store.List(t.Context(), setaside.Query{Role: setaside.RoleProjector, SetAsideOnly: true})
	require.NoError(t, err)
	byItem := map[string]setaside.Item{}
	for _, it := range listed {
		byItem[it.Item] = it
	}
	require.Len(t, byItem, 3)
	require.Equal(t, projections.ReasonEventUndecodable, byItem[bogus].Reason)
	require.Equal(t, domain.OperationID("OP-1"), byItem[bogus].OperationID)
	require.Contains(t, byItem[bogus].Detail, "Bogus")
	require.Equal(t, fastPolicy.MaxAttempts, byItem[garbled].Attempts)
	require.Equal(t, projections.ReasonFollowsSkipped, byItem[follows].Reason)

	// A rebuild of the same log skips the same events and agrees row for
	// row with the live read models (the markers included).
	res := e.rebuild()
	require.Equal(t, 3, res.Skipped)
	e.requireSameRows(e.schema, res.Schema)
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM (SELECT event_id, reason FROM %s.skipped_events EXCEPT SELECT event_id, reason FROM `+
		pgx.Identifier{res.Schema}.Sanitize()+`.skipped_events) d`))
}

// A failure of the read-model database is an outage, not the event's: the
// batch is retried, nothing is set aside, nothing is skipped.
func TestReadModelFailureIsNotAnItemFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.world()
	store := &setaside.Memory{}
	p := e.projector(func(c *projections.Config) { c.SetAside = store })
	var mu sync.Mutex
	failed := 0
	p.SetBeforeCommit(func(context.Context, pgx.Tx) error {
		mu.Lock()
		defer mu.Unlock()
		if failed < 2*fastPolicy.MaxAttempts { // more than an event's bound
			failed++
			return errors.New("injected: the read-model database went away")
		}
		return nil
	})
	e.waitVisible()
	e.start(p)
	e.waitCaughtUp(e.schema)
	counts, err := store.Counts(t.Context())
	require.NoError(t, err)
	require.Empty(t, counts, "no event is blamed for the database's failure")
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.skipped_events`))
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE projection_incomplete`))
	e.requireRebuildEquals()
}

// rebuild folds the log into a side schema and returns the result.
func (e *env) rebuild() projections.RebuildResult {
	e.t.Helper()
	e.waitVisible()
	side := "rb_" + uuid.NewString()[:8]
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		_, _ = e.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{side}.Sanitize()+` CASCADE`)
	})
	res, err := projections.Rebuild(e.t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side})
	require.NoError(e.t, err)
	return res
}
