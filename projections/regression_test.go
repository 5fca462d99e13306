package projections_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// seenRegressions keeps what the projector reported.
type seenRegressions struct {
	mu   sync.Mutex
	regs []eventstore.Regression
}

func (s *seenRegressions) ObserveRegression(_ context.Context, r eventstore.Regression) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs = append(s.regs, r)
}

func (s *seenRegressions) all() []eventstore.Regression {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]eventstore.Regression(nil), s.regs...)
}

// TestProjectorNoticesTheLogWentBack, on PostgreSQL: the log loses the
// last operation the projector folded (a failover to an asynchronous
// standby). The projector says so once (projector_checkpoint, within its
// check's second), moves its checkpoint back to what the log still holds,
// and folds what is written after, the checkpoint following the log again.
func TestProjectorNoticesTheLogWentBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.request("OP-KEPT", 1_000).allow()
	obs := &seenRegressions{}
	e.start(e.projector(func(c *projections.Config) { c.Regressions = obs }))
	e.waitCaughtUp(e.schema)
	e.request("OP-LOST", 2_000).allow()
	e.waitCaughtUp(e.schema)

	pgtest.Shorten(t, e.url, e.store.Schema(), domain.OperationID("OP-LOST").StreamName(), -1)
	waitFor(t, "the regression noticed", func() bool { return len(obs.all()) > 0 })
	e.request("OP-AFTER", 3_000)
	waitFor(t, "the operation written after folded", func() bool {
		return e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-AFTER'`) == 1
	})
	e.waitCaughtUp(e.schema)
	regs := obs.all()
	require.Len(t, regs, 1, "%v", regs)
	require.Equal(t, domain.CacheProjectorCheckpoint, regs[0].Cache)
	require.Empty(t, regs[0].Stream, "the global log")
}
