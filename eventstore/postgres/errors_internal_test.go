package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{Severity: "ERROR", Code: code})
	}
	cases := []struct {
		err  error
		want error
	}{
		{pg("23505"), eventstore.ErrWrongExpectedVersion},
		{pg("08006"), eventstore.ErrUnavailable},
		{pg("08001"), eventstore.ErrUnavailable},
		{pg("57P01"), eventstore.ErrUnavailable},
		{pg("57P02"), eventstore.ErrUnavailable},
		{pg("57P03"), eventstore.ErrUnavailable},
		{pg("53300"), eventstore.ErrUnavailable},
		{pg("42P01"), ErrSchemaOutdated},
		{pg("3F000"), ErrSchemaOutdated},
		{pg("22P02"), eventstore.ErrInvalidAppend},
		{io.EOF, eventstore.ErrUnavailable},
		{fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), eventstore.ErrUnavailable},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, eventstore.ErrUnavailable},
		{fmt.Errorf("write: %w", syscall.EPIPE), eventstore.ErrUnavailable},
		{context.Canceled, eventstore.ErrUnavailable},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), eventstore.ErrUnavailable},
		{puddle.ErrClosedPool, eventstore.ErrUnavailable},
		{pgconn.ErrConnClosed, eventstore.ErrUnavailable},
	}
	for _, tc := range cases {
		got := interpretError("op", tc.err)
		require.ErrorIs(t, got, tc.want, "%v", tc.err)
		require.ErrorIs(t, got, tc.err, "the cause stays visible")
	}
	for _, other := range []error{pg("42601"), pg("40001"), errors.New("boom")} {
		got := interpretError("op", other)
		require.NotErrorIs(t, got, eventstore.ErrUnavailable)
		require.NotErrorIs(t, got, eventstore.ErrWrongExpectedVersion)
		require.ErrorIs(t, got, other)
	}
	require.NoError(t, interpretError("op", nil))
}

func TestStatementsNeverNotify(t *testing.T) {
	t.Parallel()
	st := newStatements(`"s"`)
	for _, sql := range []string{st.appendBatch, st.appendOne, st.settle, st.readStream, st.readStreams, st.readAll, st.head, st.readHeads, st.loadSnapshot, st.saveSnapshot} {
		require.NotContains(t, sql, "NOTIFY")
		require.NotContains(t, sql, "pg_notify")
		require.NotContains(t, sql, ";", "one statement")
	}
}
