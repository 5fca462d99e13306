package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"opledger/adapters/httpapi"
	"opledger/adapters/pgqueue"
	"opledger/adapters/tracing"
	"opledger/adapters/transport"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/projections"
)

// serveRoles are the background roles serve runs beside the API; each can be
// switched off to run it elsewhere.
var serveRoles = settings.ServeRoles

// maxReadyLag is how far behind the projector may be before /readyz fails.
const maxReadyLag = 60 * time.Second

// backgroundRoles builds the enabled roles, and returns the relays (nil
// when the relay is disabled) for their lag. Each role's run may be called
// again after it returned (the supervisor restarts it); what must outlive
// one run (the relay's publisher) is released by its close.
func backgroundRoles(db *dbConfig, s serveSettings, pool *pgxpool.Pool, store eventstore.Store,
	lg *ledger.Handler, projector *projections.Projector, metrics *httpapi.Metrics, tp trace.TracerProvider, log *slog.Logger) ([]role, []*transport.Relay, error) {
	var roles []role
	var relays []*transport.Relay
	index, err := projections.NewIndex(pool, db.viewSchema)
	if err != nil {
		return nil, nil, err
	}
	failing, err := pgqueue.NewSetAside(pool, db.transport) // no I/O: the same table serve's projector writes
	if err != nil {
		return nil, nil, err
	}
	if !s.disabled["projector"] {
		roles = append(roles, role{name: "projector", run: projector.Run, health: projectorHealth(projector)})
	}
	if !s.disabled["sweeper"] {
		sw, err := recovery.NewSweeper(recovery.SweeperConfig{Ledger: lg, Index: index, Logger: log, Interval: s.sweepInterval, SetAside: failing})
		if err != nil {
			return nil, nil, err
		}
		roles = append(roles, role{name: "sweeper", run: sw.Run})
	}
	if !s.disabled["reconciler"] {
		r, err := reconcilerRole(s, lg, index, failing, metrics, tp, log)
		if err != nil {
			return nil, nil, err
		}
		roles = append(roles, r)
	}
	if !s.disabled["relay"] {
		r, rs, err := relayRole(pool, db.transport, s, store, failing, log)
		if err != nil {
			return nil, nil, err
		}
		roles, relays = append(roles, r), rs
	}
	return roles, relays, nil
}

// projectorHealth fails when the projector trails the log by more than
// maxReadyLag: the read models the sweeper and reconciler search are stale.
func projectorHealth(p *projections.Projector) func(context.Context) error {
	return func(ctx context.Context) error {
		lag, err := p.Lag(ctx)
		if err != nil {
			return fmt.Errorf("projection lag: %w", err)
		}
		if lag.Behind > maxReadyLag {
			return fmt.Errorf("projector stalled: %s (%d events) behind the log", lag.Behind.Round(time.Second), lag.Events)
		}
		return nil
	}
}

func reconcilerRole(s serveSettings, lg *ledger.Handler, index *projections.Index, failing setaside.Store, metrics *httpapi.Metrics,
	tp trace.TracerProvider, log *slog.Logger) (role, error) {
	// The reconciler asks the provider one call at a time.
	client, err := newProviderClient(s.profile, s.providerURL, 1, log, metrics)
	if err != nil {
		return role{}, err
	}
	exports, err := newExportClient(s.exportURL, 1, log, metrics)
	if err != nil {
		return role{}, err
	}
	cfg := recovery.ReconcilerConfig{Ledger: lg, Index: index, Provider: tracing.Provider(client, tp),
		Profile: s.profile, Logger: log, Interval: s.reconcileInterval, SetAside: failing}
	if exports != nil {
		cfg.Exports, cfg.ExportProfile = tracing.Exports(exports, tp), exports.Profile()
	}
	rc, err := recovery.NewReconciler(cfg)
	if err != nil {
		return role{}, err
	}
	run := func(ctx context.Context) error {
		t := time.NewTicker(s.reconcileInterval)
		defer t.Stop()
		for {
			rctx, end := tracing.Round(ctx, tp, "reconcile round") // the parent of its provider reads and ledger commands
			steps, err := rc.ReconcileOnce(rctx)
			end(len(steps), err)
			metrics.ObserveReconcile(steps)
			if err != nil && ctx.Err() == nil {
				log.Warn("reconcile round failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return role{name: "reconciler", run: run}, nil
}

// relayRole runs the standard relays together: when one returns, the
// others are stopped and the role returns its error (to be restarted
// whole). Its health is each relay's own report (an outage: publishing,
// reading the log, the checkpoint, the leader lock) and, with Kafka, a
// bounded dial of the brokers, which a standby relay (another serve leads)
// does not otherwise make.
func relayRole(pool *pgxpool.Pool, schema string, s serveSettings, store eventstore.Store, failing setaside.Store, log *slog.Logger) (role, []*transport.Relay, error) {
	publisher, closePub, err := openPublisher(pool, schema, s.brokers, log)
	if err != nil {
		return role{}, nil, err
	}
	fail := func(err error) (role, []*transport.Relay, error) { closePub(); return role{}, nil, err }
	checks, err := pgqueue.NewCheckpoints(pool, schema)
	if err != nil {
		return fail(err)
	}
	relays, err := transport.StandardRelays(transport.RelaysConfig{Store: store, Checkpoints: checks, Publisher: publisher,
		SetAside: failing, Leader: relayLeader(pool, schema), Logger: log})
	if err != nil {
		return fail(err)
	}
	run := func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, r := range relays {
			g.Go(func() error { return r.Run(gctx) })
		}
		return g.Wait()
	}
	var probe *brokerProbe
	if s.brokers != nil {
		probe = newBrokerProbe(s.brokers)
	}
	health := func(ctx context.Context) error {
		var errs []error
		for _, r := range relays {
			errs = append(errs, r.Status().Problem())
		}
		if probe != nil {
			errs = append(errs, probe.check(ctx))
		}
		return errors.Join(errs...)
	}
	return role{name: "relay", run: run, close: closePub, health: health}, relays, nil
}
