package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Shorten makes stream end at version keep in schema (a negative keep: no
// events, no streams row), in one transaction on a connection of its own:
// the stream's later events are deleted, its streams row gets the version
// and head hash of the event at keep, and a snapshot past keep goes. That
// is what the stream holds after a failover to a standby that had not
// received those events (an asynchronous one): the rows as they were
// before the lost commits. Unlike a real promotion, the server's
// transaction ids go on from where they were rather than being handed
// out again; a reader that remembers a lost event must notice its absence
// either way. Shorten drops the stream's events whatever follows them in
// the log: callers drop only the latest events of the log.
func Shorten(tb testing.TB, url, schema, stream string, keep int64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.Context()), adminTimeout)
	defer cancel()
	conn := connect(ctx, tb, url)
	defer conn.Close(context.WithoutCancel(ctx))
	id := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM "+id("events")+" WHERE stream_id = $1 AND stream_version > $2", stream, keep); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+id("snapshots")+" WHERE stream_id = $1 AND version > $2", stream, keep); err != nil {
			return err
		}
		if keep < 0 {
			_, err := tx.Exec(ctx, "DELETE FROM "+id("streams")+" WHERE stream_id = $1", stream)
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE "+id("streams")+" s SET version = e.stream_version, head_hash = e.event_hash FROM "+id("events")+
			" e WHERE s.stream_id = $1 AND e.stream_id = s.stream_id AND e.stream_version = $2", stream, keep)
		return err
	})
	if err != nil {
		tb.Fatalf("pgtest: shorten %s in %s to version %d: %v", stream, schema, keep, err)
	}
}
