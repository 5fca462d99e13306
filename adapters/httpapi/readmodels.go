package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"opledger/projections"
)

// readModels is the read models as the API reads them: every query goes
// through projections.Reads, which owns the tables (docs/projections.md
// describes them); this package writes no SQL of its own.
type readModels struct {
	*projections.Reads
}

func newReadModels(db projections.Querier, schema string) (*readModels, error) {
	reads, err := projections.NewReads(db, schema)
	if err != nil {
		return nil, fmt.Errorf("read-model schema: %w", err)
	}
	return &readModels{Reads: reads}, nil
}

// readError classifies a read-model failure: a server-reported error is a
// bug or a schema problem (500, logged); anything else is the database out
// of reach (503).
func readError(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &apiError{status: http.StatusInternalServerError, code: CodeInternal, cause: fmt.Errorf("read %s: %w", what, err),
			message: "the read models cannot be queried; the server log has the cause (was 'opledger migrate' run?)"}
	}
	return &apiError{status: http.StatusServiceUnavailable, code: CodeStoreUnavailable, retryAfter: "1", cause: fmt.Errorf("read %s: %w", what, err),
		message: "the read models' database is unreachable: retry later"}
}

// utc returns t in UTC, or nil for a NULL.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ping is the default readiness check: the read models answer.
func (m *readModels) ping(ctx context.Context) error { return m.Ping(ctx) }
