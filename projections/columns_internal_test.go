package projections

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// Each read-model table is defined once, by its row type: the migrated
// table's columns are the row type's, in the same order; the statements'
// column lists follow from it; and copyValues gives every field, in that
// order (an empty optional value as NULL). Adding a column means a
// migration, a field at the end of the row type and its value at the end of
// copyValues: this test names whichever is missing.
func TestRowTypesAreTheTables(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = Migrate(ctx, pool, schema)
	require.NoError(t, err)
	sql := newStatements(schema)

	for _, tc := range []struct {
		table string
		row   copier
		stmt  tableStatements
	}{
		{"operations", &operationRow{}, sql.operations},
		{"executions", &executionRow{}, sql.executions},
		{"capabilities", &capabilityRow{}, sql.capabilities},
		{"deliveries", &deliveryRow{}, sql.deliveries},
		{"evidence", &evidenceRow{}, sql.evidence},
		{"reconciliations", &reconciliationRow{}, sql.reconciliations},
	} {
		t.Run(tc.table, func(t *testing.T) {
			rows, err := pool.Query(ctx, `SELECT column_name FROM information_schema.columns
WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, schema, tc.table)
			require.NoError(t, err)
			var columns []string
			for rows.Next() {
				var c string
				require.NoError(t, rows.Scan(&c))
				columns = append(columns, c)
			}
			require.NoError(t, rows.Err())
			typ := reflect.TypeOf(tc.row).Elem()
			require.Equal(t, columns, fieldColumns(typ), "the migrated table's columns are the row type's fields, in order")
			require.Equal(t, columns, tc.stmt.columns, "COPY writes every column in table order")

			// Every field set to a value of its own: copyValues gives them
			// in column order.
			filled := reflect.New(typ)
			want := fill(filled.Elem())
			got := filled.Interface().(copier).copyValues()
			require.Len(t, got, len(columns))
			for i, c := range columns {
				require.Equal(t, want[i], normalizeValue(got[i]), "copyValues at %d is column %s", i, c)
			}
		})
	}
}

// fill sets every exported field of v (embedded structs in place) to a
// distinct non-zero value and returns the values in field order, as COPY
// sends them.
func fill(v reflect.Value) []any {
	var out []any
	n := 0
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f, ft := v.Field(i), v.Type().Field(i)
			if ft.Anonymous && ft.Type.Kind() == reflect.Struct {
				walk(f)
				continue
			}
			if !ft.IsExported() {
				continue
			}
			n++
			switch f.Interface().(type) {
			case string:
				f.SetString(fmt.Sprintf("v%d", n))
			case int64, int32:
				f.SetInt(int64(n))
			case bool:
				f.SetBool(true)
			case time.Time:
				f.Set(reflect.ValueOf(time.Date(2026, 11, 26, 14, 0, n, 0, time.UTC)))
			case *bool:
				b := true
				f.Set(reflect.ValueOf(&b))
			case *int64:
				x := int64(n)
				f.Set(reflect.ValueOf(&x))
			case json.RawMessage:
				f.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))))
			default:
				panic(fmt.Sprintf("fill: field %s of type %s", ft.Name, ft.Type))
			}
			out = append(out, normalizeValue(f.Interface()))
		}
	}
	walk(v)
	return out
}

// normalizeValue makes a field and its COPY value comparable: integers as
// int64, raw JSON as its text, pointers as what they point to.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case json.RawMessage:
		return string(x)
	case *bool:
		return *x
	case *int64:
		return *x
	}
	return v
}
