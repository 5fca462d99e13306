package pgstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/transport"
)

// SQL of the relay checkpoints, %[1]s standing for the quoted schema.
const (
	sqlLoadCheckpoint = `SELECT position FROM %[1]s.relay_checkpoints WHERE name = $1`
	sqlSaveCheckpoint = `INSERT INTO %[1]s.relay_checkpoints (name, position, updated_at) VALUES ($1, $2, now())
ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, updated_at = EXCLUDED.updated_at`
)

// Checkpoints persists relay checkpoints in the transport schema. It
// implements transport.Checkpoints and is safe for concurrent use.
type Checkpoints struct {
	db         Querier
	load, save string
}

// NewCheckpoints returns the checkpoints of schema (DefaultSchema when
// empty) on db. It does no I/O; the schema must have been migrated.
func NewCheckpoints(db Querier, schema string) (*Checkpoints, error) {
	schema, err := Schema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("pgstate: nil database")
	}
	ident := pgx.Identifier{schema}.Sanitize()
	return &Checkpoints{db: db, load: fmt.Sprintf(sqlLoadCheckpoint, ident), save: fmt.Sprintf(sqlSaveCheckpoint, ident)}, nil
}

// Load implements transport.Checkpoints: "" when name never saved one.
func (c *Checkpoints) Load(ctx context.Context, name string) (string, error) {
	var pos string
	err := c.db.QueryRow(ctx, c.load, name).Scan(&pos)
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
	if _, err := c.db.Exec(ctx, c.save, name, position); err != nil {
		return fmt.Errorf("save relay checkpoint %s: %w", name, err)
	}
	return nil
}

var _ transport.Checkpoints = (*Checkpoints)(nil)
