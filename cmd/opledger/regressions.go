package main

import (
	"context"
	"log/slog"
	"time"

	"opledger/adapters/httpapi"
	"opledger/domain/clock"
	"opledger/domain/regression"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

// regressionRefresh is how often serve reads the regression stream (and
// retries recording what its recorder could not write yet): a regression
// another process recorded shows in /readyz and the metrics within it.
const regressionRefresh = 5 * time.Second

// regressions is a process's answer to a log that went back: the
// recorder its caches tell (the command handler's, the PostgreSQL store's
// head cache), and, in serve, the monitor of the regression stream.
type regressions struct {
	recorder *regression.Recorder
	monitor  *regression.Monitor
	log      *slog.Logger
}

// newRegressions builds the recorder (noticer names the process) and the
// monitor, and has a PostgreSQL store's head cache tell the recorder.
// metrics may be nil (a worker serves none).
func newRegressions(store eventstore.Store, noticer string, clk clock.Clock, log *slog.Logger, metrics *httpapi.Metrics) (*regressions, error) {
	cfg := regression.RecorderConfig{Store: store, Noticer: noticer, Clock: clk, Logger: log}
	if metrics != nil {
		cfg.OnNoticed = metrics.ObserveRegression
	}
	rec, err := regression.NewRecorder(cfg)
	if err != nil {
		return nil, err
	}
	mon, err := regression.NewMonitor(regression.MonitorConfig{Store: store, Clock: clk, Logger: log, Regressions: rec})
	if err != nil {
		return nil, err
	}
	if ps, ok := store.(*postgres.Store); ok {
		ps.ObserveRegressions(rec)
	}
	return &regressions{recorder: rec, monitor: mon, log: log}, nil
}

// follow reads the regression stream every regressionRefresh (and at
// once when this process notices one) and retries recording what could
// not be written, until ctx ends: serve and workers.
func (r *regressions) follow(ctx context.Context) {
	go r.flush(ctx)
	_ = r.monitor.Run(ctx, regressionRefresh, r.recorder.Wake)
}

// flush retries, every regressionRefresh until ctx ends, recording the
// regressions noticed while the store could not be written.
func (r *regressions) flush(ctx context.Context) {
	t := time.NewTicker(regressionRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.recorder.Flush(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("log regression: recording still failing; retrying", "err", err)
		}
	}
}
