package httpapi

import (
	"context"
	"net/http"
	"time"

	"opledger/domain"
)

// scrapeTimeout bounds the read-model queries of one scrape.
const scrapeTimeout = 5 * time.Second

var executionStates = []domain.ExecutionState{domain.ExecExecuting, domain.ExecCompleted, domain.ExecNotApplied, domain.ExecUnknown, domain.ExecEscalated}

// metrics: GET /metrics, no token. The scrape-time gauges are refreshed
// first, on the request's context; a gauge that cannot be read keeps its
// last value and counts opledger_metrics_scrape_errors_total.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout)
	s.refreshGauges(ctx)
	cancel()
	s.exposition.ServeHTTP(w, r)
}

func (s *Server) refreshGauges(ctx context.Context) {
	s.scrapeMu.Lock()
	defer s.scrapeMu.Unlock()
	m, reads := s.cfg.Metrics, s.reads
	if counts, err := reads.ExecutionsByState(ctx); err != nil {
		m.scrapeErrors.WithLabelValues("executions").Inc()
		s.cfg.Logger.WarnContext(ctx, "metrics: executions by state", "err", err)
	} else {
		for _, st := range executionStates {
			m.executions.WithLabelValues(string(st)).Set(float64(counts[string(st)]))
		}
	}
	switch since, found, err := reads.OldestUnknown(ctx); {
	case err != nil:
		m.scrapeErrors.WithLabelValues("unknown_age").Inc()
		s.cfg.Logger.WarnContext(ctx, "metrics: oldest unknown", "err", err)
	case found:
		m.unknownAge.Set(max(0, s.cfg.Ledger.Clock().Now().Sub(since).Seconds()))
	default:
		m.unknownAge.Set(0)
	}
	s.refreshAttention(ctx)
	if s.cfg.ProjectionLag != nil {
		if lag, err := s.cfg.ProjectionLag(ctx); err != nil {
			m.scrapeErrors.WithLabelValues("projection_lag").Inc()
			s.cfg.Logger.WarnContext(ctx, "metrics: projection lag", "err", err)
		} else {
			m.lagEvents.Set(float64(lag.Events))
			m.lagSeconds.Set(lag.Behind.Seconds())
		}
	}
	s.refreshRoleGauges(ctx)
	if s.cfg.Regressions != nil {
		if err := s.cfg.Regressions.Refresh(ctx); err != nil {
			s.scrapeFailed(ctx, "log_regression", err)
		}
		alarm := 0.0
		if s.cfg.Regressions.Status().Alarm() {
			alarm = 1
		}
		m.unacknowledged.Set(alarm)
	}
}

// refreshRoleGauges sets the series the Status funcs feed. A series whose
// source fails keeps its last values and counts a scrape error.
func (s *Server) refreshRoleGauges(ctx context.Context) {
	m, st := s.cfg.Metrics, s.cfg.Status
	if st.Roles != nil {
		for _, r := range st.Roles(ctx) {
			if r.State == RoleDisabled {
				continue // not run here: no series, so that an alert on a role down never fires for it
			}
			up := 0.0
			if r.OK && r.State == RoleRunning {
				up = 1
			}
			m.roleUp.WithLabelValues(r.Role).Set(up)
			m.roleRestarts.WithLabelValues(r.Role).Set(float64(r.Restarts))
		}
	}
	if st.Replication != nil {
		m.replication.set(st.Replication())
	}
	if st.RelayLag != nil {
		if lags, err := st.RelayLag(ctx); err != nil {
			s.scrapeFailed(ctx, "relay_lag", err)
		} else {
			for _, l := range lags {
				m.relayLagEvents.WithLabelValues(l.Relay).Set(float64(l.Events))
				m.relayLagSeconds.WithLabelValues(l.Relay).Set(l.Behind.Seconds())
			}
		}
	}
	if st.Queue != nil {
		if depths, err := st.Queue(ctx); err != nil {
			s.scrapeFailed(ctx, "queue", err)
		} else {
			m.queueDepth.Reset()
			m.deadLetters.Reset()
			for _, d := range depths {
				m.queueDepth.WithLabelValues(d.Topic, "ready").Set(float64(d.Ready))
				m.queueDepth.WithLabelValues(d.Topic, "hidden").Set(float64(d.Hidden))
				m.deadLetters.WithLabelValues(d.Topic).Set(float64(d.DeadLetters))
			}
		}
	}
	if st.SetAside != nil {
		if counts, err := st.SetAside(ctx); err != nil {
			s.scrapeFailed(ctx, "set_aside", err)
		} else {
			m.setAside.Reset() // a role whose items were all released has no row
			for _, c := range counts {
				m.setAside.WithLabelValues(string(c.Role), "set_aside").Set(float64(c.SetAside))
				m.setAside.WithLabelValues(string(c.Role), "retrying").Set(float64(c.Retrying))
			}
		}
	}
}

// refreshAttention sets the oldest escalation's age and the executions past
// their lease, by the ledger's clock.
func (s *Server) refreshAttention(ctx context.Context) {
	g, now := s.cfg.Metrics.attention, s.cfg.Ledger.Clock().Now()
	switch since, found, err := s.reads.OldestEscalated(ctx); {
	case err != nil:
		s.scrapeFailed(ctx, "escalated_age", err)
	case found:
		g.escalatedAge.Set(max(0, now.Sub(since).Seconds()))
	default:
		g.escalatedAge.Set(0)
	}
	if n, earliest, err := s.reads.PastLease(ctx, now); err != nil {
		s.scrapeFailed(ctx, "past_lease", err)
	} else {
		g.pastLease.Set(float64(n))
		age := 0.0
		if n > 0 {
			age = max(0, now.Sub(earliest).Seconds())
		}
		g.pastLeaseAge.Set(age)
	}
}

func (s *Server) scrapeFailed(ctx context.Context, gauge string, err error) {
	s.cfg.Metrics.scrapeErrors.WithLabelValues(gauge).Inc()
	s.cfg.Logger.WarnContext(ctx, "metrics: "+gauge, "err", err)
}
