package projections

import (
	"cmp"
	"fmt"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore/postgres/pgmigrate"
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
const maxSchemaNameLen = pgmigrate.MaxSchemaNameLen

func defaultSchema(schema string) string { return cmp.Or(schema, DefaultSchema) }

func validateSchemaName(schema string) error {
	if err := pgmigrate.ValidateSchemaName(schema); err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	return nil
}

// quoteSchema returns schema quoted for SQL.
func quoteSchema(schema string) string { return pgx.Identifier{schema}.Sanitize() }

func defaultName(name string) string { return cmp.Or(name, DefaultName) }
