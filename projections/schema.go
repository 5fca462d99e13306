package projections

import (
	"cmp"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Defaults for the read models' location and the projection's name.
const (
	// DefaultSchema holds the read models when no schema is configured.
	DefaultSchema = "opledger"
	// DefaultName names the projection in projection_checkpoints (and keys
	// its locks) when none is configured.
	DefaultName = "read_models"
)

// maxSchemaNameLen is Postgres's identifier limit (NAMEDATALEN-1 bytes);
// longer names would be silently truncated by the server, so they are refused.
const maxSchemaNameLen = 63

func defaultSchema(schema string) string { return cmp.Or(schema, DefaultSchema) }

func validateSchemaName(schema string) error {
	if schema == "" || len(schema) > maxSchemaNameLen {
		return fmt.Errorf("projections: schema name %q must be 1..%d bytes", schema, maxSchemaNameLen)
	}
	for _, r := range schema {
		if r == 0 {
			return fmt.Errorf("projections: schema name %q contains NUL", schema)
		}
	}
	return nil
}

// quoteSchema returns schema quoted for SQL.
func quoteSchema(schema string) string { return pgx.Identifier{schema}.Sanitize() }

func defaultName(name string) string { return cmp.Or(name, DefaultName) }
