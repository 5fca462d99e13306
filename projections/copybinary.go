package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A batch's created rows are written with one COPY per table in
// PostgreSQL's binary format, encoded here from the Go types copyValues
// gives, each the one its column's type takes:
//
//	nil                      NULL
//	string                   text
//	json.RawMessage          jsonb
//	int32, int64             int4, int8
//	bool, *bool              bool (a nil pointer: NULL)
//	*int64                   int8 (a nil pointer: NULL)
//	time.Time                timestamptz
//
// These are the bytes pgx's generic CopyFrom sends for the same values;
// encoding them by a switch on the type, with no encode plan looked up per
// value, is what makes a row cheap for the client to write.
// TestBinaryCopyWritesWhatTheUpsertWrites holds the encodings and the
// tables together.

// copyHeader opens binary COPY data: the signature, no flags, no extension.
var copyHeader = []byte("PGCOPY\n\377\r\n\000\000\000\000\000\000\000\000\000")

// copySQL is the COPY statement writing columns of table in binary.
func copySQL(table pgx.Identifier, columns []string) string {
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	return fmt.Sprintf("COPY %s (%s) FROM STDIN (FORMAT binary)", table.Sanitize(), strings.Join(quoted, ", "))
}

// encodeCopy appends n rows, row i's values given by values(i), to a binary
// COPY stream and returns the whole stream.
func encodeCopy(n, columns int, values func(i int) []any) ([]byte, error) {
	buf := make([]byte, 0, len(copyHeader)+n*64*columns/4)
	buf = append(buf, copyHeader...)
	for i := range n {
		row := values(i)
		if len(row) != columns {
			return nil, fmt.Errorf("copy: row %d has %d values for %d columns", i, len(row), columns)
		}
		buf = binary.BigEndian.AppendUint16(buf, uint16(columns))
		for j, v := range row {
			var err error
			if buf, err = appendCopyValue(buf, v); err != nil {
				return nil, fmt.Errorf("copy: row %d, column %d: %w", i, j+1, err)
			}
		}
	}
	return binary.BigEndian.AppendUint16(buf, math.MaxUint16), nil // the trailer: -1
}

// postgresEpoch is the zero of timestamptz's binary form.
var postgresEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// appendCopyValue appends one field: its length (-1: NULL) and its bytes.
func appendCopyValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return binary.BigEndian.AppendUint32(buf, math.MaxUint32), nil // -1
	case string:
		if len(x) > math.MaxInt32 {
			return nil, fmt.Errorf("a text of %d bytes", len(x))
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(x)))
		return append(buf, x...), nil
	case json.RawMessage:
		if len(x) >= math.MaxInt32 {
			return nil, fmt.Errorf("a jsonb of %d bytes", len(x))
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(x)+1))
		buf = append(buf, 1) // jsonb's binary format version
		return append(buf, x...), nil
	case int32:
		buf = binary.BigEndian.AppendUint32(buf, 4)
		return binary.BigEndian.AppendUint32(buf, uint32(x)), nil
	case int64:
		buf = binary.BigEndian.AppendUint32(buf, 8)
		return binary.BigEndian.AppendUint64(buf, uint64(x)), nil
	case *int64:
		if x == nil {
			return appendCopyValue(buf, nil)
		}
		return appendCopyValue(buf, *x)
	case bool:
		buf = binary.BigEndian.AppendUint32(buf, 1)
		if x {
			return append(buf, 1), nil
		}
		return append(buf, 0), nil
	case *bool:
		if x == nil {
			return appendCopyValue(buf, nil)
		}
		return appendCopyValue(buf, *x)
	case time.Time:
		// Microseconds since 2000-01-01 UTC; the rows are normalized to
		// the microsecond before they are written.
		us := x.Unix()*1_000_000 + int64(x.Nanosecond())/1000 - postgresEpoch.Unix()*1_000_000
		buf = binary.BigEndian.AppendUint32(buf, 8)
		return binary.BigEndian.AppendUint64(buf, uint64(us)), nil
	}
	return nil, fmt.Errorf("no binary COPY encoding for a %T", v)
}

// copyBinary writes rows into a table with one binary COPY on tx's
// connection.
func copyBinary(ctx context.Context, tx pgx.Tx, sql string, columns int, n int, values func(i int) []any) error {
	data, err := encodeCopy(n, columns, values)
	if err != nil {
		return err
	}
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(data), sql)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("copy: %d of %d rows written", tag.RowsAffected(), n)
	}
	return nil
}
