// Package setaside is the port that keeps one failing item from stopping a
// loop. Every background loop of the ledger — sweeper, reconciler, log index,
// projector, relay, the Postgres queue and the Kafka consumer — works through
// items (an execution, an event, a message). When an item fails with
// something that is not a refusal (its stream cannot be loaded, the store
// answered with an error, a decode failed), the loop records the failure
// here and goes on with the next item. The item is retried after a backoff,
// a bounded number of times (Policy); then it is set aside: no loop tries it
// again until an operator releases it (`opledger set-aside release`,
// POST /v1/set-aside/release). Set-aside items are visible in the CLI, the
// API and /metrics.
//
// Nothing is lost by setting an item aside: the item's facts stay where they
// are (the log, the queue); only automatic retries stop. A set-aside
// execution that is Executing or Unknown still blocks its operation, so no
// new effect can start for it while it waits for a person.
package setaside

import (
	"context"
	"errors"
	"slices"
	"time"

	"opledger/domain"
)

// Role names the loop an item belongs to. Items of different roles never
// share an entry, even with the same id.
type Role string

// The roles that set items aside.
const (
	RoleSweeper    Role = "sweeper"
	RoleReconciler Role = "reconciler"
	RoleLogIndex   Role = "log-index"
	RoleProjector  Role = "projector"
	RoleRelay      Role = "relay"
	RoleQueue      Role = "queue"
	RoleKafka      Role = "kafka"
)

// Roles lists every role, for callers that check a role named from outside
// (the CLI, the API).
var Roles = []Role{RoleSweeper, RoleReconciler, RoleLogIndex, RoleProjector, RoleRelay, RoleQueue, RoleKafka}

// Known reports whether r is one of Roles.
func (r Role) Known() bool { return slices.Contains(Roles, r) }

// Failure is one failed attempt at an item.
type Failure struct {
	Role Role
	// Item identifies what failed within the role: an execution id, an event
	// id, a message id, a partition/offset. At most domain.MaxIDLength*2
	// bytes.
	Item        string
	OperationID domain.OperationID // when known, for people looking for it
	// Reason is a stable, machine-readable code (e.g. "stream.corrupt",
	// "store.error", "decode.failed").
	Reason string
	Detail string // what went wrong, in words; kept escaped and cut
	At     time.Time
}

// Item is an item with at least one recorded failure and no success since.
type Item struct {
	Role          Role
	Item          string
	OperationID   domain.OperationID
	Reason        string // of the latest failure
	Detail        string // of the latest failure
	Attempts      int    // failed attempts since the last success or release
	FirstFailedAt time.Time
	LastFailedAt  time.Time
	// RetryAt is when the item may be tried again; meaningless once SetAside.
	RetryAt time.Time
	// SetAside: Attempts reached the policy's bound; no loop retries the item
	// until it is released.
	SetAside   bool
	SetAsideAt time.Time
}

// Held reports whether the item may not be tried at now.
func (it Item) Held(now time.Time) bool { return it.SetAside || now.Before(it.RetryAt) }

// Query selects items for listing. Results are ordered by (FirstFailedAt,
// Role, Item) and paged with a keyset cursor: pass the last item of a page
// as After to get the next.
type Query struct {
	Role         Role // "" for every role
	SetAsideOnly bool // only items no longer retried automatically
	After        *Item
	Limit        int // 1..MaxListLimit; 0 means DefaultListLimit
}

// Listing bounds.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Count is how many items of a role are set aside and how many are still
// being retried.
type Count struct {
	Role     Role
	SetAside int
	Retrying int
}

// Store keeps failing items. Implementations are safe for concurrent use and
// honour their context. The PostgreSQL implementation is pgsetaside.Store
// (in the transport schema, which a projection rebuild never replaces);
// Memory is the in-process one.
type Store interface {
	// Fail records one failed attempt at f's item and returns the item as it
	// now stands: its RetryAt follows p's backoff, and it is SetAside once
	// Attempts reaches p.MaxAttempts. Failing an item already set aside
	// counts the attempt and keeps it set aside.
	Fail(ctx context.Context, f Failure, p Policy) (Item, error)
	// Clear forgets an item: it succeeded, or an operator released it. Its
	// next failure counts from one. Clearing an unknown item is not an error.
	Clear(ctx context.Context, role Role, item string) error
	// Held returns, of items, those that may not be tried at now (set aside,
	// or backing off until after now), keyed by item. At most MaxHeldBatch
	// items per call.
	Held(ctx context.Context, role Role, items []string, now time.Time) (map[string]Item, error)
	// Get returns one item, or false when it has no recorded failure.
	Get(ctx context.Context, role Role, item string) (Item, bool, error)
	// List returns items matching q, in (FirstFailedAt, Role, Item) order.
	List(ctx context.Context, q Query) ([]Item, error)
	// Counts returns, per role with any item, how many are set aside and
	// how many are retrying.
	Counts(ctx context.Context) ([]Count, error)
}

// MaxHeldBatch bounds the items one Held call may ask about.
const MaxHeldBatch = 1000

// ErrInvalid is wrapped by the errors of calls with malformed arguments (an
// empty role or item, a limit out of range).
var ErrInvalid = errors.New("setaside: invalid argument")
