package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"opledger/adapters/httpapi"
	"opledger/cmd/opledger/internal/settings"
	"opledger/eventstore"
)

// replicationGrace is how long a process that requires synchronous
// replication runs on after the database answered that its writes are not
// (an unreachable database is an outage, not an answer, and is not
// counted): long enough for a failover manager to give a new primary its
// synchronous standby (Patroni: a loop or two), short enough that few
// writes go unreplicated. Then the process stops, and refuses to start
// again until the standby is back.
const replicationGrace = time.Minute

// replicationTimeout bounds one question to the database.
const replicationTimeout = 5 * time.Second

// replicationWatch asks the event store, at start and every interval,
// whether a write it acknowledges is synchronously replicated
// (eventstore.ReplicationProbe), keeps the last answer for /readyz,
// /metrics and the console, and says loudly when it is not. Required, it
// refuses to start without it, and stops the process after
// replicationGrace without it.
type replicationWatch struct {
	probe    eventstore.ReplicationProbe
	required bool
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu     sync.Mutex
	last   httpapi.Replication
	lostAt time.Time // when an answer first said not synchronous; zero while synchronous
	failed bool      // the last question went unanswered
	synced bool      // the last answer said synchronous
}

// replicationSettings are the replication settings of serve and the worker.
type replicationSettings struct {
	required bool
	interval time.Duration
}

// replicationBindings are what serve and the worker bind.
var replicationBindings = []*settings.Setting{settings.RequireSyncReplication, settings.ReplicationCheckInterval}

func replicationFrom(f *settings.Flags) replicationSettings {
	return replicationSettings{required: f.Bool(settings.RequireSyncReplication), interval: f.Duration(settings.ReplicationCheckInterval)}
}

// newReplicationWatch watches probe. A store that cannot tell (KurrentDB:
// nil) gives nil, unless replication is required: then it is an error.
func newReplicationWatch(s replicationSettings, probe eventstore.ReplicationProbe, log *slog.Logger) (*replicationWatch, error) {
	if probe == nil {
		if s.required {
			return nil, fmt.Errorf("%s asks PostgreSQL whether the event store's writes are synchronously replicated; --store kurrent keeps them in KurrentDB: run it as a cluster of three and leave the setting off",
				settings.RequireSyncReplication.Env)
		}
		return nil, nil
	}
	return &replicationWatch{probe: probe, required: s.required, interval: s.interval,
		log: log, now: time.Now, last: httpapi.Replication{Required: s.required, Detail: "not checked yet"}}, nil
}

// statusFunc is status for httpapi.Status and the console (nil without a
// watch).
func (w *replicationWatch) statusFunc() func() httpapi.Replication {
	if w == nil {
		return nil
	}
	return w.status
}

// start asks once. Required and not synchronous, or not answered, is an
// error naming what the server said; otherwise it logs the answer (loudly
// when not synchronous) and returns nil.
func (w *replicationWatch) start(ctx context.Context) error {
	r, err := w.check(ctx)
	if w.required && (err != nil || !r.Synchronous) {
		if err != nil {
			return fmt.Errorf("replication required (%s) and the database cannot say whether writes are synchronously replicated: %w",
				settings.RequireSyncReplication.Env, err)
		}
		return fmt.Errorf("replication required (%s) and the event store's writes are %s (docs/operations.md, High availability)",
			settings.RequireSyncReplication.Env, r.Detail)
	}
	return nil
}

// run asks every interval until ctx ends (nil), or, when required, until
// answers have said "not synchronous" for replicationGrace (an error).
func (w *replicationWatch) run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := w.check(ctx); err != nil {
			continue // an outage is not an answer
		}
		if err := w.overdue(); err != nil {
			return err
		}
	}
}

// overdue is the error that stops a process that requires synchronous
// replication and has gone without it for replicationGrace.
func (w *replicationWatch) overdue() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.required || w.lostAt.IsZero() || w.now().Sub(w.lostAt) < replicationGrace {
		return nil
	}
	return fmt.Errorf("replication required (%s) and the event store's writes have not been synchronously replicated for %s: %s",
		settings.RequireSyncReplication.Env, w.now().Sub(w.lostAt).Round(time.Second), w.last.Detail)
}

// status is the last answer, for /readyz, /metrics and the console.
func (w *replicationWatch) status() httpapi.Replication {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// check asks the database once, records the answer and logs what changed.
func (w *replicationWatch) check(ctx context.Context) (eventstore.Replication, error) {
	qctx, cancel := context.WithTimeout(ctx, replicationTimeout)
	r, err := w.probe.Replication(qctx)
	cancel()
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return r, err
		}
		if !w.failed {
			w.log.WarnContext(ctx, "cannot ask the database whether writes are synchronously replicated", "err", err)
		}
		w.failed = true
		w.last.Synchronous, w.last.SyncStandbys = false, 0
		w.last.Detail = "cannot ask the database: " + err.Error()
		return r, err
	}
	first, was := w.last.CheckedAt == nil, w.synced
	w.failed, w.synced = false, r.Synchronous
	w.last = httpapi.Replication{Synchronous: r.Synchronous, SyncStandbys: r.SyncStandbys, Required: w.required, Detail: r.Detail, CheckedAt: &now}
	switch {
	case r.Synchronous:
		w.lostAt = time.Time{}
		if first || !was {
			w.log.InfoContext(ctx, "writes are synchronously replicated", "sync_standbys", r.SyncStandbys, "detail", r.Detail)
		}
	case w.required:
		if w.lostAt.IsZero() {
			w.lostAt = now
		}
		w.log.ErrorContext(ctx, "WRITES ARE NOT SYNCHRONOUSLY REPLICATED and "+settings.RequireSyncReplication.Env+" requires it: not ready; stopping unless a synchronous standby returns",
			"detail", r.Detail, "without_since", w.lostAt, "stops_after", replicationGrace)
	default:
		if w.lostAt.IsZero() {
			w.lostAt = now
		}
		if first || was {
			w.log.WarnContext(ctx, "WRITES ARE NOT SYNCHRONOUSLY REPLICATED: a failover to a standby can lose what this ledger acknowledged, "+
				"and spent authority would look unused. Give PostgreSQL a synchronous standby (docs/operations.md, High availability), "+
				"or set "+settings.RequireSyncReplication.Env+"=true to refuse to run without one",
				"detail", r.Detail)
		}
	}
	return r, nil
}
