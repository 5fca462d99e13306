package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// attentionGauges are the series that say a person is needed, beside the
// oldest Unknown's age: how long the oldest escalation has waited, the
// executions still Executing past their lease (read from the read models
// at each scrape), and when serve's scheduled digests were last brought up
// to date (set by the digest role through ObserveDigest).
type attentionGauges struct {
	escalatedAge   prometheus.Gauge
	pastLease      prometheus.Gauge
	pastLeaseAge   prometheus.Gauge
	digestSigned   *prometheus.GaugeVec // no labels: absent until the first digest
	digestInterval *prometheus.GaugeVec // no labels: absent unless serve signs digests
}

func newAttentionGauges() attentionGauges {
	return attentionGauges{
		escalatedAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_escalated_oldest_age_seconds", Help: "How long the oldest Escalated execution has waited for a person, by the ledger's clock (0: none waits).",
		}),
		pastLease: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_executions_past_lease", Help: "Executions still Executing in the read models after their lease expired (capped at 10000); the sweeper makes them Unknown within seconds.",
		}),
		pastLeaseAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_executions_past_lease_oldest_seconds", Help: "How long ago the most overdue Executing execution's lease expired, by the ledger's clock (0: none).",
		}),
		digestSigned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "opledger_digest_last_signed_timestamp_seconds",
			Help: "Unix time of serve's last scheduled digest tick that left the whole log under a signed digest: it signed one, or the one it signed last still covers every event. Absent until then.",
		}, nil),
		digestInterval: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "opledger_digest_interval_seconds", Help: "How often serve signs a digest (--digest-every); absent when it signs none.",
		}, nil),
	}
}

func (g attentionGauges) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.escalatedAge, g.pastLease, g.pastLeaseAge, g.digestSigned, g.digestInterval}
}

// DigestSchedule says that this process signs a digest every interval
// (opledger_digest_interval_seconds).
func (m *Metrics) DigestSchedule(interval time.Duration) {
	m.attention.digestInterval.WithLabelValues().Set(interval.Seconds())
}

// ObserveDigest records a scheduled digest tick at which every event of
// the log is under a signed digest (opledger_digest_last_signed_timestamp_seconds).
func (m *Metrics) ObserveDigest(at time.Time) {
	m.attention.digestSigned.WithLabelValues().Set(float64(at.UnixNano()) / 1e9)
}
