package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
)

// errCheckpointMoved means the checkpoint row no longer holds the position a
// batch was read from: another projector applied meanwhile, or a rebuild was
// swapped in. The batch is rolled back and the caller reloads the checkpoint.
var errCheckpointMoved = errors.New("projection checkpoint moved")

// Checkpoint is where a projection stands in the global log.
type Checkpoint struct {
	// Position is the position of the last event folded (nil: none yet, the
	// start of the log); Text is its String(), as stored.
	Position eventstore.Position
	Text     string
	// EventsApplied counts the events folded since the start of the log,
	// those of streams the read models ignore included.
	EventsApplied int64
}

// ensureCheckpoint creates projection name's checkpoint row at the start of
// the log if it has none.
func ensureCheckpoint(ctx context.Context, q Querier, sql statements, name string, now time.Time) error {
	if _, err := q.Exec(ctx, sql.ensureCheckpoint, name, now); err != nil {
		return fmt.Errorf("create checkpoint %s: %w", name, err)
	}
	return nil
}

// scanCheckpoint reads a checkpoint row (position, events_applied) and parses
// its position with store.
func scanCheckpoint(row pgx.Row, store eventstore.Store, name string) (Checkpoint, error) {
	var (
		text *string
		cp   Checkpoint
	)
	if err := row.Scan(&text, &cp.EventsApplied); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Checkpoint{}, fmt.Errorf("checkpoint %s: %w: no row", name, errCheckpointMoved)
		}
		return Checkpoint{}, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	if text == nil || *text == "" {
		return cp, nil
	}
	p, err := store.ParsePosition(*text)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	cp.Position, cp.Text = p, *text
	return cp, nil
}

// ReadCheckpoint returns projection name's checkpoint in schema (the
// defaults when empty), parsed by store. A projection that never ran reads
// as the start of the log.
func ReadCheckpoint(ctx context.Context, db Querier, store eventstore.Store, schema, name string) (Checkpoint, error) {
	schema, name = defaultSchema(schema), defaultName(name)
	if err := validateSchemaName(schema); err != nil {
		return Checkpoint{}, err
	}
	cp, err := scanCheckpoint(db.QueryRow(ctx, newStatements(schema).readCheckpoint, name), store, name)
	if errors.Is(err, errCheckpointMoved) {
		return Checkpoint{}, nil
	}
	return cp, err
}
