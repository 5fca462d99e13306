package projections

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// A row COPY writes (binary, copybinary.go) reads back as the same row
// written by the upsert (JSON through jsonb_populate_recordset): for every
// table, a row with every field set and one with every optional value
// empty (NULL where the column takes NULL).
func TestBinaryCopyWritesWhatTheUpsertWrites(t *testing.T) {
	ctx := t.Context()
	url, copied := pgtest.Schema(t)
	_, upserted := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for _, s := range []string{copied, upserted} {
		_, err = Migrate(ctx, pool, s)
		require.NoError(t, err)
	}
	viaCopy, viaUpsert := newStatements(copied), newStatements(upserted)

	for _, tc := range []struct {
		table      string
		full, thin copier
		copy, ups  tableStatements
	}{
		{"operations", &operationRow{}, &operationRow{}, viaCopy.operations, viaUpsert.operations},
		{"executions", &executionRow{}, &executionRow{}, viaCopy.executions, viaUpsert.executions},
		{"capabilities", &capabilityRow{}, &capabilityRow{}, viaCopy.capabilities, viaUpsert.capabilities},
		{"deliveries", &deliveryRow{}, &deliveryRow{}, viaCopy.deliveries, viaUpsert.deliveries},
		{"evidence", &evidenceRow{}, &evidenceRow{}, viaCopy.evidence, viaUpsert.evidence},
		{"reconciliations", &reconciliationRow{}, &reconciliationRow{}, viaCopy.reconciliations, viaUpsert.reconciliations},
	} {
		t.Run(tc.table, func(t *testing.T) {
			fill(reflect.ValueOf(tc.full).Elem())
			fill(reflect.ValueOf(tc.thin).Elem())
			thin(reflect.ValueOf(tc.thin).Elem())
			rows := []copier{tc.full, tc.thin}

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer rollback(ctx, tx)
			require.NoError(t, copyRows(ctx, tx, tc.copy, rows))
			var b pgx.Batch
			require.NoError(t, queueRows(&b, tc.ups.upsert, rows))
			require.NoError(t, tx.SendBatch(ctx, &b).Close())

			read := func(table pgx.Identifier) string {
				var got string
				require.NoError(t, tx.QueryRow(ctx, `SELECT jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text)::text FROM `+table.Sanitize()+` t`).Scan(&got))
				return got
			}
			fromCopy, fromUpsert := read(tc.copy.table), read(tc.ups.table)
			require.Equal(t, fromUpsert, fromCopy)
			var n []json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(fromCopy), &n))
			require.Len(t, n, 2)
		})
	}
}

// thin empties v's optional values (text, times, pointers, raw JSON) and
// moves its integers past fill's, so the row is a second one (a distinct
// event_seq) that writes NULL wherever a column takes it.
func thin(v reflect.Value) {
	for i := range v.NumField() {
		f, ft := v.Field(i), v.Type().Field(i)
		if ft.Anonymous && ft.Type.Kind() == reflect.Struct {
			thin(f)
			continue
		}
		if !ft.IsExported() {
			continue
		}
		switch f.Interface().(type) {
		case string, *bool, *int64, json.RawMessage:
			f.SetZero()
		case time.Time:
			f.SetZero()
		case int64, int32:
			f.SetInt(f.Int() + 1000)
		}
	}
}

func TestBinaryCopyRefusesAValueItCannotEncode(t *testing.T) {
	_, err := encodeCopy(1, 1, func(int) []any { return []any{3.5} })
	require.ErrorContains(t, err, "no binary COPY encoding for a float64")
	_, err = encodeCopy(1, 2, func(int) []any { return []any{"one"} })
	require.ErrorContains(t, err, "1 values for 2 columns")
}
