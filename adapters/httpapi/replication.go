package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replication is what /readyz, /metrics and the console say of the event
// store's replication as last checked (eventstore.ReplicationProbe): whether
// a write acknowledged now survives the loss of the database machine.
type Replication struct {
	// Synchronous: every commit acknowledged now has reached a synchronous
	// standby first.
	Synchronous bool `json:"synchronous"`
	// SyncStandbys counts the standbys the server waits for.
	SyncStandbys int `json:"sync_standbys"`
	// Required: this process refuses to run without synchronous
	// replication (OPLEDGER_REQUIRE_SYNC_REPLICATION); /readyz is 503 while
	// it is missing.
	Required bool `json:"required"`
	// Detail says what the server said, or why it could not be asked.
	Detail string `json:"detail"`
	// CheckedAt is when the server last answered (nil: never yet).
	CheckedAt *time.Time `json:"checked_at,omitempty"`
}

// replicationGauges are opledger_replication_synchronous and
// opledger_replication_sync_standbys, set at each scrape from
// Status.Replication.
type replicationGauges struct {
	synchronous  prometheus.Gauge
	syncStandbys prometheus.Gauge
}

func newReplicationGauges() replicationGauges {
	return replicationGauges{
		synchronous: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_replication_synchronous",
			Help: "1 when this process's writes are synchronously replicated (synchronous_commit on, remote_write or remote_apply, synchronous_standby_names set, a sync or quorum standby in pg_stat_replication), else 0.",
		}),
		syncStandbys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opledger_replication_sync_standbys", Help: "Synchronous standbys the event store's server waits for, as last checked.",
		}),
	}
}

func (g replicationGauges) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.synchronous, g.syncStandbys}
}

// set shows r. A process that does not check (no Status.Replication)
// shows 0: nothing says its writes are replicated.
func (g replicationGauges) set(r Replication) {
	sync := 0.0
	if r.Synchronous {
		sync = 1
	}
	g.synchronous.Set(sync)
	g.syncStandbys.Set(float64(r.SyncStandbys))
}
