// Package recovery holds the roles that resolve what executors left behind:
// the sweeper (an expired lease becomes Unknown) and the reconciler (an
// Unknown becomes a fact by asking the provider, or goes to a person).
//
// No role stalls on one item. A candidate that fails with anything but a
// refusal the role expects (its stream cannot be loaded, contention beyond
// the handler's retries, an unexpected refusal) is recorded in a
// setaside.Store, retried after a backoff a bounded number of times, then
// set aside until an operator releases it; the round goes on with the other
// candidates. The store being unreachable is an outage, not an item failure
// (see failures.go). Candidates are walked with a keyset cursor that moves
// forward across rounds and wraps to the start, so old failures never keep
// the index from reaching new work (see walker.go).
package recovery

import (
	"cmp"
	"context"
	"time"

	"opledger/domain"
)

// ExecutionRef names an execution and its operation.
type ExecutionRef struct {
	OperationID domain.OperationID
	ExecutionID domain.ExecutionID
	// Since is when the execution entered the state it was found in (its
	// lease expiry for ExpiredLeases, when it became Unknown for
	// UnknownExecutions).
	Since time.Time
}

// Cursor is a keyset position in an index's order, (Since, ExecutionID):
// a query returns the candidates strictly after it. The zero Cursor is the
// start.
type Cursor struct {
	Since       time.Time
	ExecutionID domain.ExecutionID
}

// IsStart reports whether c is the start of the order.
func (c Cursor) IsStart() bool { return c.ExecutionID == "" && c.Since.IsZero() }

// CursorOf is the position of ref: a query after it returns what follows ref.
func CursorOf(ref ExecutionRef) Cursor { return Cursor{Since: ref.Since, ExecutionID: ref.ExecutionID} }

// After reports whether ref comes strictly after c in the order.
func (c Cursor) After(ref ExecutionRef) bool {
	if c.IsStart() {
		return true
	}
	return cmp.Or(ref.Since.Compare(c.Since), cmp.Compare(ref.ExecutionID, c.ExecutionID)) > 0
}

// Index finds candidates without scanning streams. The Postgres projections
// implement it with indexed read models; LogIndex follows the global log in
// memory. An index may lag the log: every role re-checks a candidate against
// the operation's stream before acting, so a stale candidate costs a load,
// never a wrong write.
//
// Both queries order by (Since, ExecutionID) and page with a keyset cursor:
// they return the candidates strictly after after, at most limit. A page
// shorter than limit means the end was reached; the caller starts again
// from the zero Cursor.
type Index interface {
	// ExpiredLeases lists Executing executions whose lease expired at or
	// before now, by lease expiry.
	ExpiredLeases(ctx context.Context, now time.Time, after Cursor, limit int) ([]ExecutionRef, error)
	// UnknownExecutions lists Unknown (not Escalated) executions, by when
	// they became Unknown.
	UnknownExecutions(ctx context.Context, after Cursor, limit int) ([]ExecutionRef, error)
}
