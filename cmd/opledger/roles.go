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
	"opledger/adapters/roles"
	"opledger/adapters/tracing"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/clock"
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

// backgroundRoles builds serve's roles with roles.Build: the projector
// always (the API and the console read its lag), the others when enabled.
// It returns what was built and the enabled roles to supervise. Each role's
// run may be called again after it returned (the supervisor restarts it);
// what must outlive one run (the relay's publisher) is released by its
// close.
func backgroundRoles(db *dbConfig, s serveSettings, pool *pgxpool.Pool, store eventstore.Store, lg *ledger.Handler, clk clock.Clock,
	failing setaside.Store, metrics *httpapi.Metrics, tp trace.TracerProvider, log *slog.Logger) (*roles.Roles, []role, error) {
	cfg := roles.Config{
		Store: store, Ledger: func(eventstore.Store) (*ledger.Handler, error) { return lg, nil },
		Clock: clk, Logger: log, SetAside: failing,
		Projector: &projections.Config{Pool: pool, Schema: db.viewSchema, Regressions: lg.Regressions()},
	}
	if !s.disabled[roles.Sweeper] {
		cfg.Sweeper = &recovery.SweeperConfig{Interval: s.sweepInterval}
	}
	if !s.disabled[roles.Reconciler] {
		rc, err := reconcilerConfig(s, metrics, tp, log)
		if err != nil {
			return nil, nil, err
		}
		cfg.Reconciler = rc
	}
	var closePub func()
	if !s.disabled[roles.Relay] {
		publisher, closeP, err := openPublisher(pool, db.transport, s.brokers, log)
		if err != nil {
			return nil, nil, err
		}
		checks, err := pgstate.NewCheckpoints(pool, db.transport)
		if err != nil {
			closeP()
			return nil, nil, err
		}
		// On Kafka the relay also publishes the operation feed for the
		// services downstream (on the Postgres queue they read GET /v1/feed).
		cfg.Relays = &transport.RelaysConfig{Checkpoints: checks, Publisher: publisher, Leader: relayLeader(pool, db.transport),
			OperationFeed: len(s.brokers) > 0, Regressions: lg.Regressions()}
		closePub = closeP
	}
	built, err := roles.Build(cfg)
	if err != nil {
		if closePub != nil {
			closePub()
		}
		return nil, nil, err
	}
	var run []role
	if !s.disabled[roles.Projector] {
		run = append(run, role{name: roles.Projector, run: built.Projector.Run, health: projectorHealth(built.Projector)})
	}
	if built.Sweeper != nil {
		run = append(run, role{name: roles.Sweeper, run: built.Sweeper.Run})
	}
	if built.Reconciler != nil {
		run = append(run, role{name: roles.Reconciler, run: built.Reconciler.Run})
	}
	if cfg.Relays != nil {
		run = append(run, relayRole(built.Relays, s.brokers, closePub))
	}
	return built, run, nil
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

// reconcilerConfig is serve's reconciler: the provider's and the
// export-delivery service's clients, traced; each round a span (the parent
// of its provider reads and ledger commands) and metrics.
func reconcilerConfig(s serveSettings, metrics *httpapi.Metrics, tp trace.TracerProvider, log *slog.Logger) (*recovery.ReconcilerConfig, error) {
	// The reconciler asks the provider one call at a time.
	client, err := newProviderClient(s.profile, s.providerURL, 1, log, metrics)
	if err != nil {
		return nil, err
	}
	exports, err := newExportClient(s.exportURL, 1, log, metrics)
	if err != nil {
		return nil, err
	}
	cfg := &recovery.ReconcilerConfig{Provider: tracing.Provider(client, tp), Profile: s.profile, Interval: s.reconcileInterval,
		OnRound: func(ctx context.Context) (context.Context, func([]recovery.Step, error)) {
			rctx, end := tracing.Round(ctx, tp, "reconcile round")
			return rctx, func(steps []recovery.Step, err error) {
				end(len(steps), err)
				metrics.ObserveReconcile(steps)
				for _, st := range steps {
					if st.Verdict == recovery.VerdictLostEffect {
						metrics.ObserveLostEffect()
					}
				}
			}
		},
		Export: providerExportSource(s.providerExport, s.profile.Name)}
	if exports != nil {
		cfg.Exports, cfg.ExportProfile = tracing.Exports(exports, tp), exports.Profile()
	}
	return cfg, nil
}

// relayRole runs the standard relays together: when one returns, the
// others are stopped and the role returns its error (to be restarted
// whole). Its health is each relay's own report (an outage: publishing,
// reading the log, the checkpoint, the leader lock) and, with Kafka, a
// bounded dial of the brokers, which a standby relay (another serve leads)
// does not otherwise make.
func relayRole(relays []*transport.Relay, brokers []string, closePub func()) role {
	run := func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, r := range relays {
			g.Go(func() error { return r.Run(gctx) })
		}
		return g.Wait()
	}
	var probe *brokerProbe
	if brokers != nil {
		probe = newBrokerProbe(brokers)
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
	return role{name: roles.Relay, run: run, close: closePub, health: health}
}
