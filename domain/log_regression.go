package domain

import "time"

// RegressionStream holds the evidence that the log went backwards: every
// LogRegressed a process recorded when a cache or cursor of it found the
// store holding less than it had seen, and every operator's
// LogRegressionAcknowledged. It is never an operation's stream.
const RegressionStream = "evidence-regressions"

// Stable type names of the regression stream's events.
const (
	TypeLogRegressed              = "LogRegressed"
	TypeLogRegressionAcknowledged = "LogRegressionAcknowledged"
)

// Caches and cursors that remember the log, as LogRegressed.Cache names
// them (and the label of opledger_log_regressions_total).
const (
	CacheState               = "state_cache"          // the command handler's folded states (serve, the API)
	CacheWorker              = "worker_cache"         // a worker's command handler
	CacheHead                = "head_cache"           // the PostgreSQL store's stream heads
	CacheRelayCheckpoint     = "relay_checkpoint"     // a relay's position in the log
	CacheProjectorCheckpoint = "projector_checkpoint" // the projector's position in the log
	CacheIndexCheckpoint     = "index_checkpoint"     // the recovery roles' log index
	CacheDigestTree          = "digest_tree"          // serve's scheduled digests' Merkle tree
	CacheRegressionStream    = "regression_stream"    // the regression monitor's own cursor
	CacheFeedHead            = "feed_head_cache"      // the operation feed's operations' first events
)

// MaxSeenExecutions bounds the executions a LogRegressed lists.
const MaxSeenExecutions = 16

// LogRegressed records that a cache or cursor found the store holding less
// than it had seen: a stream shorter than its cached version, an event at a
// version (or a position) other than the one it remembered, a log that
// ends before its checkpoint. It is what a failover to a standby that had
// not received the last commits leaves behind (an asynchronous standby):
// acknowledged writes are gone. The cache dropped what it remembered and
// read again; the event says what it had seen and what the store holds, so
// a person can tell what was lost. It stays unacknowledged, and /readyz,
// metrics and the console say so, until an operator acknowledges it.
type LogRegressed struct {
	// Cache names the cache or cursor that noticed (CacheState, ...).
	Cache string `json:"cache"`
	// Noticer names the process that noticed: serve, a worker's id.
	Noticer string `json:"noticer"`
	// Stream is the stream that went back; empty when it was the global
	// log (a checkpoint, the digest tree).
	Stream string `json:"stream,omitempty"`
	// SeenVersion is the stream version the cache remembered (-1 for the
	// global log); SeenEventID the event it knew at that version (or at
	// SeenPosition).
	SeenVersion int64  `json:"seen_version"`
	SeenEventID string `json:"seen_event_id,omitempty"`
	// HeldVersion is the stream's version as the store holds it now (-1:
	// no events, or the global log); HeldEventID the event the store holds
	// where the cache remembered SeenEventID, when another one is there.
	HeldVersion int64  `json:"held_version"`
	HeldEventID string `json:"held_event_id,omitempty"`
	// SeenPosition and HeldPosition are global-log positions, as the store
	// prints them: the cursor's, and the log's end (or the event now
	// where the cursor's was), when a cursor of the log noticed.
	SeenPosition string `json:"seen_position,omitempty"`
	HeldPosition string `json:"held_position,omitempty"`
	// SeenExecutions are the executions the cache knew of the operation
	// (at most MaxSeenExecutions): what the store may have lost, for the
	// lost-effect check to ask the executor about.
	SeenExecutions []SeenExecution `json:"seen_executions,omitempty"`
	Detail         string          `json:"detail,omitempty"`
	// Unrecorded counts regressions this process noticed, beyond its bound
	// of recorded ones, since the last it recorded (counted, not dropped).
	Unrecorded int64     `json:"unrecorded,omitempty"`
	NoticedAt  time.Time `json:"noticed_at"`
}

// SeenExecution is one execution as a cache knew it before the regression.
type SeenExecution struct {
	ExecutionID       ExecutionID    `json:"execution_id"`
	IdempotencyKey    IdempotencyKey `json:"idempotency_key"`
	State             ExecutionState `json:"state"`
	ProviderReference string         `json:"provider_reference,omitempty"`
}

// LogRegressionAcknowledged records that an authenticated operator has seen
// the regressions recorded up to and including version Through of
// RegressionStream. Later regressions are unacknowledged again.
type LogRegressionAcknowledged struct {
	Through int64 `json:"through"`
	// Regressions is how many LogRegressed events the acknowledgement
	// covers that no earlier acknowledgement did.
	Regressions    int64     `json:"regressions"`
	Operator       string    `json:"operator"`
	Note           string    `json:"note"`
	AcknowledgedAt time.Time `json:"acknowledged_at"`
}

func (LogRegressed) EventType() string              { return TypeLogRegressed }
func (LogRegressionAcknowledged) EventType() string { return TypeLogRegressionAcknowledged }

// SeenExecutionsOf lists o's executions as a LogRegressed carries them, the
// latest first, at most MaxSeenExecutions.
func SeenExecutionsOf(o *Operation) []SeenExecution {
	var out []SeenExecution
	for i := len(o.Executions) - 1; i >= 0 && len(out) < MaxSeenExecutions; i-- {
		x := o.Executions[i]
		out = append(out, SeenExecution{ExecutionID: x.ID, IdempotencyKey: x.IdempotencyKey, State: x.State, ProviderReference: x.ProviderReference})
	}
	return out
}
