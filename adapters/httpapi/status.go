package httpapi

import (
	"context"
	"time"

	"opledger/domain/setaside"
)

// Status is what /readyz and /metrics learn from the roles running beside
// the API (serve's projector, sweeper, reconciler and relay). Every func is
// optional and called with the request's bounded context; each must be safe
// for concurrent use.
type Status struct {
	// Roles reports each background role. /readyz is 503 unless every one
	// is OK; /metrics shows opledger_role_up and opledger_role_restarts.
	Roles func(ctx context.Context) []RoleStatus
	// RelayLag measures each relay against the head of the log
	// (opledger_relay_lag_events, opledger_relay_lag_seconds).
	RelayLag func(ctx context.Context) ([]RelayLag, error)
	// Queue counts the Postgres queue's ready messages and dead letters by
	// topic (opledger_queue_depth, opledger_queue_dead_letters).
	Queue func(ctx context.Context) ([]QueueDepth, error)
	// SetAside counts the items each loop set aside or is retrying
	// (opledger_set_aside_items).
	SetAside func(ctx context.Context) ([]setaside.Count, error)
	// Replication reports the event store's replication as last checked
	// (no I/O: the process checks on its own schedule). /readyz shows it,
	// and is 503 when it is Required and not Synchronous; /metrics shows
	// opledger_replication_synchronous and _sync_standbys.
	Replication func() Replication
	// Alarms are what /readyz reports without failing, besides the log
	// regression alarm (Config.Regressions).
	Alarms func(ctx context.Context) []Alarm
}

// Role states, as RoleStatus.State.
const (
	RoleStarting   = "starting"   // started, not yet confirmed running
	RoleRunning    = "running"    // running
	RoleRestarting = "restarting" // exited with an error; waiting to restart
	RoleFailed     = "failed"     // exited too often; serve is stopping
	RoleStopped    = "stopped"    // stopped on shutdown
	RoleDisabled   = "disabled"   // not run here (--disable)
)

// RoleStatus is one background role as /readyz reports it.
type RoleStatus struct {
	Role  string `json:"role"`
	State string `json:"state"`
	// OK is false when the role is not doing its work: not running, or
	// running but unable to (the relay cannot reach Kafka, the projector is
	// stalled). Detail says why.
	OK       bool       `json:"ok"`
	Detail   string     `json:"detail,omitempty"`
	Restarts int        `json:"restarts"`
	Since    *time.Time `json:"since,omitempty"` // when it entered State
	// LastError is the error it last exited with.
	LastError string `json:"last_error,omitempty"`
}

// RelayLag is how far one relay trails the log.
type RelayLag struct {
	Relay string
	// Events after the relay's checkpoint, up to a bound (Capped: more).
	Events int64
	Capped bool
	// Behind is the age of the oldest event not yet relayed (0: caught up).
	Behind time.Duration
}

// QueueDepth is one topic of the Postgres queue.
type QueueDepth struct {
	Topic       string
	Ready       int64 // visible messages, waiting to be claimed
	Hidden      int64 // in flight, or backing off after a failure
	DeadLetters int64 // dead-lettered, not resubmitted
}
