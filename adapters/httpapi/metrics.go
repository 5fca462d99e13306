package httpapi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/recovery"
)

// Metrics holds opledger's Prometheus metrics in a registry of its own. The
// API counts its own requests, claims and refusals; the other roles report
// through the hooks below, so one /metrics shows the whole process:
//
//   - the provider client: set provider.Config.Observer to the Metrics (it
//     implements provider.Observer): sends by kind and outcome, latency;
//   - the worker: wrap its ledger with InstrumentLedger: claims by status
//     and refusals by reason, as the API counts its own;
//   - the reconciler: call ObserveReconcile with the steps ReconcileOnce
//     returns: results by verdict.
//
// Executions by state, the oldest Unknown's age and the projection lag are
// gauges read from the read models (and the ProjectionLag func) at each
// scrape. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	claims          *prometheus.CounterVec
	refusals        *prometheus.CounterVec
	executions      *prometheus.GaugeVec
	unknownAge      prometheus.Gauge
	lagEvents       prometheus.Gauge
	lagSeconds      prometheus.Gauge
	scrapeErrors    *prometheus.CounterVec
	reconciled      *prometheus.CounterVec
	providerSends   *prometheus.CounterVec
	providerLatency *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	requestLatency  *prometheus.HistogramVec
	rateLimited     *prometheus.CounterVec
	reloads         *prometheus.CounterVec
	roleUp          *prometheus.GaugeVec
	roleRestarts    *prometheus.GaugeVec
	relayLagEvents  *prometheus.GaugeVec
	relayLagSeconds *prometheus.GaugeVec
	queueDepth      *prometheus.GaugeVec
	deadLetters     *prometheus.GaugeVec
	setAside        *prometheus.GaugeVec
	replication     replicationGauges
	attention       attentionGauges
	regressions     *prometheus.CounterVec
	unacknowledged  prometheus.Gauge
	lostEffects     prometheus.Counter
}

// NewMetrics returns metrics registered in a fresh registry, with the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opledger_claims_total", Help: "Presentations of capabilities answered, by claim status.",
		}, []string{"status"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opledger_refusals_total", Help: "Refused presentations and commands, by reason code.",
		}, []string{"reason"}),
		executions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "opledger_executions", Help: "Executions by state, from the read models at scrape time.",
		}, []string{"state"}),
		unknownAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_unknown_oldest_age_seconds", Help: "Age of the oldest Unknown execution by the ledger's clock (0: none).",
		}),
		lagEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_projection_lag_events", Help: "Events of the log not yet folded into the read models (capped).",
		}),
		lagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_projection_lag_seconds", Help: "Age of the oldest event not yet folded into the read models.",
		}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opledger_metrics_scrape_errors_total", Help: "Failures reading a scrape-time gauge, by gauge.",
		}, []string{"gauge"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opledger_reconciler_results_total", Help: "Reconciliation steps, by verdict.",
		}, []string{"verdict"}),
		providerSends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opledger_provider_requests_total", Help: "Requests sent to the provider, by kind and classified outcome.",
		}, []string{"kind", "outcome"}),
		providerLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "opledger_provider_request_duration_seconds", Help: "Provider request latency, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5ms .. ~41s
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opledger_http_requests_total", Help: "HTTP requests, by route pattern and status code.",
		}, []string{"route", "code"}),
		requestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "opledger_http_request_duration_seconds", Help: "HTTP request latency, by route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1ms .. ~8s
		}, []string{"route"}),
	}
	m.addSurface()
	m.addRegressions()
	m.replication = newReplicationGauges()
	m.reg.MustRegister(m.replication.collectors()...)
	m.attention = newAttentionGauges()
	m.reg.MustRegister(m.attention.collectors()...)
	m.reg.MustRegister(m.claims, m.refusals, m.executions, m.unknownAge, m.lagEvents, m.lagSeconds, m.scrapeErrors,
		m.reconciled, m.providerSends, m.providerLatency, m.requests, m.requestLatency,
		m.rateLimited, m.reloads, m.roleUp, m.roleRestarts, m.relayLagEvents, m.relayLagSeconds,
		m.queueDepth, m.deadLetters, m.setAside, m.regressions, m.unacknowledged, m.lostEffects, buildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// addSurface makes the series of the trust boundary and of the roles.
func (m *Metrics) addSurface() {
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opledger_rate_limited_total", Help: "Requests refused 429 rate.limited, by the token's role.",
	}, []string{"role"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opledger_reloads_total", Help: "Reloads on SIGHUP, by file (tokens, signing_keys, tls) and result (ok, error: the old one stays).",
	}, []string{"file", "result"})
	m.roleUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_role_up", Help: "1 while a background role runs and can do its work, else 0.",
	}, []string{"role"})
	m.roleRestarts = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_role_restarts", Help: "Restarts of a background role since serve started.",
	}, []string{"role"})
	m.relayLagEvents = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_relay_lag_events", Help: "Events of the log after the relay's checkpoint (capped).",
	}, []string{"relay"})
	m.relayLagSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_relay_lag_seconds", Help: "Age of the oldest event the relay has not passed yet.",
	}, []string{"relay"})
	m.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_queue_depth", Help: "Messages of the Postgres queue not yet settled, by topic and state (ready: visible; hidden: in flight or backing off).",
	}, []string{"topic", "state"})
	m.deadLetters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_queue_dead_letters", Help: "Dead letters of the Postgres queue not resubmitted, by topic.",
	}, []string{"topic"})
	m.setAside = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "opledger_set_aside_items", Help: "Items a loop failed on, by role and state (set_aside: waiting for a person; retrying).",
	}, []string{"role", "state"})
}

// addRegressions makes the series of a log that went back (issue 20): the
// regressions this process's caches and cursors noticed, whether one waits
// for an operator's acknowledgement, and the lost effects escalated.
func (m *Metrics) addRegressions() {
	m.regressions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "opledger_log_regressions_total", Help: "Log regressions this process noticed (the store held less than a cache or cursor had seen), by the cache or cursor that noticed.",
	}, []string{"cache"})
	m.unacknowledged = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "opledger_log_regression_unacknowledged", Help: "1 while a log regression is recorded that no operator has acknowledged, else 0.",
	})
	m.lostEffects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "opledger_lost_effects_escalated_total", Help: "Effects found at the provider or the export-delivery service that the ledger no longer held, escalated to a person.",
	})
}

// ObserveRegression counts one log regression noticed by cache (the
// regression.Recorder's OnNoticed).
func (m *Metrics) ObserveRegression(cache string) { m.regressions.WithLabelValues(cache).Inc() }

// ObserveLostEffect counts one lost effect escalated.
func (m *Metrics) ObserveLostEffect() { m.lostEffects.Inc() }

// buildInfo is opledger_build_info{version,revision,go_version} 1, from the
// binary's build information (Build, which `opledger version` prints too).
func buildInfo() prometheus.Collector {
	b := Build()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "opledger_build_info", Help: "The binary's version, VCS revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.RevisionLabel(), "go_version": b.GoVersion},
	})
	g.Set(1)
	return g
}

// ObserveReload counts one reload of file ("tokens", "signing_keys",
// "tls"): err nil is ok, else error (the old contents stay in use).
func (m *Metrics) ObserveReload(file string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reloads.WithLabelValues(file, result).Inc()
}

// Registry returns the registry the metrics live in; register more
// collectors there to have /metrics show them.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveClaim counts one answered presentation, and its refusal reason.
func (m *Metrics) ObserveClaim(status domain.ClaimStatus, reason domain.Reason) {
	m.claims.WithLabelValues(string(status)).Inc()
	if status != domain.StatusClaimed && reason != "" {
		m.refusals.WithLabelValues(string(reason)).Inc()
	}
}

// ObserveRefusal counts one refused command (a stale lease, an execution
// not in the state a write needs, ...).
func (m *Metrics) ObserveRefusal(reason domain.Reason) {
	m.refusals.WithLabelValues(string(reason)).Inc()
}

// ObserveReconcile counts reconciliation steps by verdict: call it with
// what recovery.Reconciler.ReconcileOnce returned.
func (m *Metrics) ObserveReconcile(steps []recovery.Step) {
	for _, st := range steps {
		m.reconciled.WithLabelValues(string(st.Verdict)).Inc()
	}
}

// ObserveSend implements provider.Observer: it counts each send by kind and
// outcome and records its latency. A read (lookup, retrieve) the provider
// answered is "found" or "not_found"; one it did not answer is Unknown or
// NotApplied, as a creation would be.
func (m *Metrics) ObserveSend(_ context.Context, s provider.Send) {
	outcome := string(s.Outcome)
	switch {
	case outcome == "":
		outcome = "none"
	case s.Kind != provider.SendCreate && s.Outcome == domain.Completed && s.NotFound:
		outcome = "not_found"
	case s.Kind != provider.SendCreate && s.Outcome == domain.Completed:
		outcome = "found"
	}
	m.providerSends.WithLabelValues(string(s.Kind), outcome).Inc()
	m.providerLatency.WithLabelValues(string(s.Kind)).Observe(s.Latency.Seconds())
}

var _ provider.Observer = (*Metrics)(nil)

func (m *Metrics) observeRequest(route, code string, took time.Duration) {
	m.requests.WithLabelValues(route, code).Inc()
	m.requestLatency.WithLabelValues(route).Observe(took.Seconds())
}
