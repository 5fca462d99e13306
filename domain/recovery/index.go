// Package recovery holds the roles that resolve what executors left behind:
// the sweeper (an expired lease becomes Unknown) and the reconciler (an
// Unknown becomes a fact by asking the provider, or goes to a person).
package recovery

import (
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

// Index finds candidates without scanning streams. The Postgres projections
// implement it with indexed read models; LogIndex follows the global log in
// memory. An index may lag the log: every role re-checks a candidate against
// the operation's stream before acting, so a stale candidate costs a load,
// never a wrong write.
type Index interface {
	// ExpiredLeases lists Executing executions whose lease expired at or
	// before now, earliest expiry first, at most limit.
	ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]ExecutionRef, error)
	// UnknownExecutions lists Unknown (not Escalated) executions, oldest
	// first, at most limit.
	UnknownExecutions(ctx context.Context, limit int) ([]ExecutionRef, error)
}
