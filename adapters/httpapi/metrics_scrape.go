package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
)

// scrapeTimeout bounds the read-model queries of one scrape.
const scrapeTimeout = 5 * time.Second

const (
	executionsByStateSQL = `SELECT state, count(*) FROM %[1]s.executions GROUP BY state`
	// oldestUnknownSQL uses executions_unknown_since_idx.
	oldestUnknownSQL = `SELECT unknown_since FROM %[1]s.executions WHERE state = 'Unknown' ORDER BY unknown_since LIMIT 1`
)

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
	if counts, err := s.executionCounts(ctx); err != nil {
		m.scrapeErrors.WithLabelValues("executions").Inc()
		s.cfg.Logger.WarnContext(ctx, "metrics: executions by state", "err", err)
	} else {
		for _, st := range executionStates {
			m.executions.WithLabelValues(string(st)).Set(float64(counts[string(st)]))
		}
	}
	var since time.Time
	switch err := reads.db.QueryRow(ctx, reads.sql(oldestUnknownSQL)).Scan(&since); err {
	case nil:
		m.unknownAge.Set(max(0, s.cfg.Ledger.Clock().Now().Sub(since).Seconds()))
	case pgx.ErrNoRows:
		m.unknownAge.Set(0)
	default:
		m.scrapeErrors.WithLabelValues("unknown_age").Inc()
		s.cfg.Logger.WarnContext(ctx, "metrics: oldest unknown", "err", err)
	}
	if s.cfg.ProjectionLag != nil {
		if lag, err := s.cfg.ProjectionLag(ctx); err != nil {
			m.scrapeErrors.WithLabelValues("projection_lag").Inc()
			s.cfg.Logger.WarnContext(ctx, "metrics: projection lag", "err", err)
		} else {
			m.lagEvents.Set(float64(lag.Events))
			m.lagSeconds.Set(lag.Behind.Seconds())
		}
	}
}

func (s *Server) executionCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.reads.db.Query(ctx, s.reads.sql(executionsByStateSQL))
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	var (
		state string
		n     int64
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		counts[state] = n
		return nil
	})
	return counts, err
}
