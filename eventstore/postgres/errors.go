package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"opledger/eventstore"
)

// ErrSchemaOutdated means the database schema is behind the migrations this
// binary embeds (or was never migrated): run Migrate (`opledger migrate`)
// before serving.
var ErrSchemaOutdated = errors.New("event store schema outdated")

// ErrLogAheadOfServer means the event log holds transaction ids the server
// has not reached: it was restored (pg_dump/pg_restore) into another cluster,
// whose transaction id counter starts lower. Events appended now would sort
// before the restored ones and readers would skip them. Before serving, stop
// the server and advance its transaction id epoch past the log's
// (pg_resetwal -e E, with E greater than max(transaction_id) >> 32); reader
// checkpoints then stay valid. CheckSchema reports it.
var ErrLogAheadOfServer = errors.New("event log ahead of the server's transaction ids")

// SQLSTATE codes interpretError treats specially. See
// https://www.postgresql.org/docs/current/errcodes-appendix.html.
const (
	sqlstateUniqueViolation    = "23505"
	sqlstateAdminShutdown      = "57P01"
	sqlstateCrashShutdown      = "57P02"
	sqlstateCannotConnectNow   = "57P03"
	sqlstateTooManyConnections = "53300"
	sqlstateInvalidSchemaName  = "3F000"
	sqlstateUndefinedTable     = "42P01"
	sqlstateClassConnection    = "08" // connection_exception and its subclasses
	sqlstateClassDataException = "22" // data_exception: bad JSON, bad UUID, NUL in text
)

// interpretError is the one place where database and driver errors become the
// port's errors; nothing above it sees a raw pgx error class it must know.
// op names the call ("append operation-OP-1", "read all") and prefixes the
// message.
//
//   - a unique violation wraps eventstore.ErrWrongExpectedVersion (Append turns
//     it into a *WrongExpectedVersionError after checking for a retry);
//   - anything that means the server could not be reached or the outcome of
//     the call is unknown (connect and dial errors, SQLSTATE class 08, 57P01,
//     57P02, 57P03, 53300, EOF, network errors, a closed connection or pool,
//     the context ending during the call) wraps eventstore.ErrUnavailable;
//   - a missing schema or table wraps ErrSchemaOutdated;
//   - a data exception (class 22: malformed JSON, NUL characters) wraps
//     eventstore.ErrInvalidAppend, since an append's events are the only
//     caller data the store sends;
//   - anything else is wrapped as it is.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == sqlstateUniqueViolation:
			return fmt.Errorf("%s: %w: %w", op, eventstore.ErrWrongExpectedVersion, err)
		case strings.HasPrefix(code, sqlstateClassConnection),
			code == sqlstateAdminShutdown, code == sqlstateCrashShutdown,
			code == sqlstateCannotConnectNow, code == sqlstateTooManyConnections:
			return eventstore.Unavailable(op, err)
		case code == sqlstateInvalidSchemaName, code == sqlstateUndefinedTable:
			return fmt.Errorf("%s: %w: %w", op, ErrSchemaOutdated, err)
		case strings.HasPrefix(code, sqlstateClassDataException):
			return fmt.Errorf("%s: %w: %w", op, eventstore.ErrInvalidAppend, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if isConnectionFailure(err) {
		return eventstore.Unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isConnectionFailure reports whether err (not a server-reported error) means
// the server could not be reached or the connection broke mid-call.
func isConnectionFailure(err error) bool {
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
		errno      syscall.Errno
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return true
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, puddle.ErrClosedPool):
		return true
	case errors.As(err, &errno):
		return errno == syscall.ECONNRESET || errno == syscall.ECONNREFUSED || errno == syscall.EPIPE ||
			errno == syscall.ECONNABORTED || errno == syscall.ETIMEDOUT
	}
	// pgconn marks errors that happened before anything was sent as safe to
	// retry; all of those are failures to use the connection at all.
	return pgconn.SafeToRetry(err)
}
