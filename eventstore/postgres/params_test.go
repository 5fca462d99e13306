package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// No statement of the store takes a uuid parameter: the store sends event
// ids as Go strings, which pgx encodes as a uuid only in text format, after
// trying binary and formatting the failure, on every call (a few per cent
// of a worker's CPU on the refund path). Ids go as text and are cast in
// the statement.
func TestStatementsTakeIDsAsText(t *testing.T) {
	t.Parallel()
	s := pgtest.OpenStore(t)
	params, err := s.ParamOIDs(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, params)
	for name, oids := range params {
		for i, oid := range oids {
			require.NotContains(t, []uint32{pgtype.UUIDOID, pgtype.UUIDArrayOID}, oid, "%s: parameter $%d", name, i+1)
		}
	}
}
