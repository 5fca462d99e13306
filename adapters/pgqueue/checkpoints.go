package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/transport"
)

// Checkpoints persists relay checkpoints in the transport schema. It
// implements transport.Checkpoints and is safe for concurrent use.
type Checkpoints struct {
	db  Querier
	sql statements
}

// NewCheckpoints returns the checkpoints of schema (DefaultSchema when
// empty) on db. It does no I/O; the schema must have been migrated.
func NewCheckpoints(db Querier, schema string) (*Checkpoints, error) {
	schema, err := schemaName(schema)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("pgqueue: nil database")
	}
	return &Checkpoints{db: db, sql: newStatements(schema)}, nil
}

// Load implements transport.Checkpoints: "" when name never saved one.
func (c *Checkpoints) Load(ctx context.Context, name string) (string, error) {
	var pos string
	err := c.db.QueryRow(ctx, c.sql.loadCheckpoint, name).Scan(&pos)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load relay checkpoint %s: %w", name, err)
	}
	return pos, nil
}

// Save implements transport.Checkpoints.
func (c *Checkpoints) Save(ctx context.Context, name, position string) error {
	if _, err := c.db.Exec(ctx, c.sql.saveCheckpoint, name, position); err != nil {
		return fmt.Errorf("save relay checkpoint %s: %w", name, err)
	}
	return nil
}

var _ transport.Checkpoints = (*Checkpoints)(nil)
