package projections

import (
	"reflect"
	"slices"
	"strings"
)

// A read-model table is defined once in Go, by its row type: the column
// names are the fields' JSON names in field order, which is the table's
// column order (migrations/*.sql add a column at the end, and its field at
// the end of the row type). The upsert's and COPY's column lists follow
// from the row type; copyValues lists the values in the same order.
// TestRowTypesAreTheTables holds the row types, the migrated tables and
// copyValues together.

// columnsOf returns the columns of row type R: its fields' JSON names, in
// field order, an embedded struct's in place; unexported fields are not
// columns.
func columnsOf[R any]() []string {
	return fieldColumns(reflect.TypeFor[R]())
}

func fieldColumns(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			out = append(out, fieldColumns(f.Type)...)
		case f.IsExported():
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
		}
	}
	return out
}

// nonKey returns columns without the key columns.
func nonKey(columns []string, key ...string) []string {
	return slices.DeleteFunc(slices.Clone(columns), func(c string) bool { return slices.Contains(key, c) })
}
