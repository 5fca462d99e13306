package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/domain"
	"opledger/domain/feed"
	"opledger/inbox"
)

// Consumer handles feed entries into the service's own schema: the inbox,
// refunds_issued, and where it stands in the feed. Safe for concurrent use
// (several instances may run on one schema).
type Consumer struct {
	pool       *pgxpool.Pool
	inbox      *inbox.Inbox
	schema     string // quoted
	schemaName string
	name       string
	// afterWrite, when set, runs after the business write and before the
	// commit (tests: a crash there).
	afterWrite func(ctx context.Context, tx pgx.Tx) error
}

// NewConsumer is the consumer name in schema of pool.
func NewConsumer(pool *pgxpool.Pool, schema, name string) (*Consumer, error) {
	ib, err := inbox.New(inbox.Config{Schema: schema, Table: "inbox", Consumer: name})
	if err != nil {
		return nil, err
	}
	return &Consumer{pool: pool, inbox: ib, schema: pgx.Identifier{schema}.Sanitize(), schemaName: schema, name: name}, nil
}

// Migrate creates the schema's tables (IF NOT EXISTS).
func (c *Consumer) Migrate(ctx context.Context) error {
	if err := c.inbox.Migrate(ctx, c.pool); err != nil {
		return err
	}
	_, err := c.pool.Exec(ctx, `
CREATE TABLE IF NOT EXISTS `+c.schema+`.refunds_issued (
    operation_id       text        PRIMARY KEY,
    order_id           text        NOT NULL,
    amount_minor       bigint      NOT NULL,
    currency           text        NOT NULL,
    provider_reference text        NOT NULL,
    execution_id       text        NOT NULL,
    issued_at          timestamptz NOT NULL,
    event_id           text        NOT NULL
);
CREATE TABLE IF NOT EXISTS `+c.schema+`.feed_position (
    consumer text PRIMARY KEY,
    position text NOT NULL
);`)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", c.schema, err)
	}
	return nil
}

// Handle handles one entry once per event id (the inbox); a refund that
// took effect is UPSERTed into refunds_issued. With position set, the
// consumer's place in the feed moves to it in the same transaction.
func (c *Consumer) Handle(ctx context.Context, e feed.Entry, position string) (inbox.Result, error) {
	res, err := c.inbox.Handle(ctx, c.pool, e.EventID, func(ctx context.Context, tx pgx.Tx) error {
		if err := c.apply(ctx, tx, e); err != nil {
			return err
		}
		if c.afterWrite != nil {
			if err := c.afterWrite(ctx, tx); err != nil {
				return err
			}
		}
		if position != "" {
			return c.savePosition(ctx, tx, position)
		}
		return nil
	})
	if res == inbox.Duplicate && position != "" {
		err = c.savePosition(ctx, c.pool, position) // move past the copy too
	}
	return res, err
}

// apply is the business change: a refund issued is one row per operation,
// written so that writing it again changes nothing (an UPSERT to the same
// values: there is one Completed execution per refund).
func (c *Consumer) apply(ctx context.Context, tx pgx.Tx, e feed.Entry) error {
	if e.Kind != domain.KindRefund || e.Outcome != domain.Completed {
		return nil // only refunds that took effect are this service's business
	}
	_, err := tx.Exec(ctx, `
INSERT INTO `+c.schema+`.refunds_issued
    (operation_id, order_id, amount_minor, currency, provider_reference, execution_id, issued_at, event_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (operation_id) DO UPDATE SET
    order_id = EXCLUDED.order_id, amount_minor = EXCLUDED.amount_minor, currency = EXCLUDED.currency,
    provider_reference = EXCLUDED.provider_reference, execution_id = EXCLUDED.execution_id`,
		string(e.OperationID), e.OrderID, e.AmountMinor, e.Currency, e.ProviderReference, string(e.ExecutionID), e.At, e.EventID)
	if err != nil {
		return fmt.Errorf("upsert refund %s: %w", e.OperationID, err)
	}
	return nil
}

func (c *Consumer) savePosition(ctx context.Context, db inbox.Execer, position string) error {
	_, err := db.Exec(ctx, `INSERT INTO `+c.schema+`.feed_position (consumer, position) VALUES ($1, $2)
ON CONFLICT (consumer) DO UPDATE SET position = EXCLUDED.position`, c.name, position)
	if err != nil {
		return fmt.Errorf("save position: %w", err)
	}
	return nil
}

// Position is where the consumer stands in the feed ("" : the start).
func (c *Consumer) Position(ctx context.Context) (string, error) {
	var p string
	err := c.pool.QueryRow(ctx, `SELECT position FROM `+c.schema+`.feed_position WHERE consumer = $1`, c.name).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read position: %w", err)
	}
	return p, nil
}
