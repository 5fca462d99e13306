package pgmigrate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/transport/pgstate"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgmigrate"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

var errWidgetsOutdated = errors.New("widget schema outdated")

// widgets is a two-migration set whose second migration only works when the
// first one's table is found through search_path.
func widgets() pgmigrate.Set {
	return pgmigrate.Set{
		Name: "widget schema",
		Files: fstest.MapFS{
			"migrations/001_widgets.sql": {Data: []byte(`CREATE TABLE widgets (id bigint PRIMARY KEY);`)},
			"migrations/002_colour.sql":  {Data: []byte(`ALTER TABLE widgets ADD COLUMN colour text;`)},
		},
		LockKey:  "pgmigrate.test:",
		Outdated: errWidgetsOutdated,
	}
}

// withMigration returns s with one more file in its migrations directory.
func withMigration(s pgmigrate.Set, file, sql string) pgmigrate.Set {
	files := fstest.MapFS{}
	for name, f := range s.Files.(fstest.MapFS) {
		files[name] = f
	}
	files["migrations/"+file] = &fstest.MapFile{Data: []byte(sql)}
	s.Files = files
	return s
}

// recordOps makes s's Interpret record each op it is given (and wrap the
// error with it); the returned slice fills as s is used.
func recordOps(s *pgmigrate.Set) *[]string {
	var ops []string
	s.Interpret = func(op string, err error) error {
		ops = append(ops, op)
		return errors.Join(errors.New(op), err)
	}
	return &ops
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	ms, err := widgets().Migrations()
	require.NoError(t, err)
	require.Equal(t, []pgmigrate.Migration{
		{Version: 1, Name: "widgets", SQL: `CREATE TABLE widgets (id bigint PRIMARY KEY);`},
		{Version: 2, Name: "colour", SQL: `ALTER TABLE widgets ADD COLUMN colour text;`},
	}, ms)

	for name, files := range map[string][]string{
		"no number":      {"widgets.sql"},
		"no name":        {"001_.sql"},
		"not sql":        {"001_widgets.txt"},
		"zero":           {"000_widgets.sql"},
		"negative":       {"-01_widgets.sql"},
		"gap":            {"001_a.sql", "003_c.sql"},
		"duplicate":      {"001_a.sql", "001_b.sql"},
		"starts above 1": {"002_b.sql"},
	} {
		fsys := fstest.MapFS{}
		for _, f := range files {
			fsys["migrations/"+f] = &fstest.MapFile{Data: []byte("SELECT 1")}
		}
		_, err := pgmigrate.Set{Files: fsys, LockKey: "k:"}.Migrations()
		require.Error(t, err, name)
	}
	_, err = pgmigrate.Set{LockKey: "k:"}.Migrations()
	require.Error(t, err, "no Files")
	_, err = pgmigrate.Set{Files: fstest.MapFS{}, Dir: "absent", LockKey: "k:"}.Migrations()
	require.Error(t, err, "no such directory")
}

// TestApplyAndCheck: Check tells a never-migrated, a current, an outdated
// and a newer schema apart; Apply creates the schema, runs pending
// migrations with search_path on the schema, and is idempotent.
func TestApplyAndCheck(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	_, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	set := widgets()

	err = set.Check(ctx, pool, schema)
	require.ErrorIs(t, err, errWidgetsOutdated, "no schema at all")
	require.ErrorContains(t, err, "check widget schema "+schema+": ")
	require.ErrorContains(t, err, "never migrated")

	applied, err := set.Apply(ctx, pool, schema)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, applied)
	require.NoError(t, set.Check(ctx, pool, schema))
	_, err = pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "widgets"}.Sanitize()+" (id, colour) VALUES (1, 'red')")
	require.NoError(t, err, "both migrations ran in the schema")

	rows, err := pool.Query(ctx, "SELECT version || ':' || name FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" ORDER BY version")
	require.NoError(t, err)
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"1:widgets", "2:colour"}, recorded)

	applied, err = set.Apply(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, applied, "a current schema is left alone")

	// A newer binary's set: the old one still finds the schema current.
	newer := withMigration(set, "003_size.sql", `ALTER TABLE widgets ADD COLUMN size int;`)
	err = newer.Check(ctx, pool, schema)
	require.ErrorIs(t, err, errWidgetsOutdated)
	require.ErrorContains(t, err, "missing migrations 003_size")
	applied, err = newer.Apply(ctx, pool, schema)
	require.NoError(t, err)
	require.Equal(t, []int{3}, applied)
	require.NoError(t, set.Check(ctx, pool, schema), "versions the set does not know are ignored")
	applied, err = set.Apply(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, applied, "versions the set does not know are left alone")
}

// TestApplyFailureLeavesNothing: one failing migration rolls back every
// pending one, the schema_migrations table included, and the error names
// the schema and the migration.
func TestApplyFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	set := withMigration(widgets(), "003_broken.sql", `ALTER TABLE no_such_table ADD COLUMN x int;`)
	ops := recordOps(&set)

	_, err := set.Apply(ctx, pool, schema)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "Interpret's error wraps the cause")
	require.Equal(t, []string{"migrate widget schema " + schema + ": migration 003_broken"}, *ops)

	var tables int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables))
	require.Zero(t, tables)
	require.ErrorIs(t, set.Check(ctx, pool, schema), errWidgetsOutdated)
}

// TestCheckOtherFailures: a failure that is not a missing schema goes
// through Interpret and is not reported as outdated.
func TestCheckOtherFailures(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	set := widgets()
	ops := recordOps(&set)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := set.Check(ctx, pool, schema)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, errWidgetsOutdated)
	require.Equal(t, []string{"check widget schema " + schema}, *ops)

	_, err = set.Apply(ctx, pool, schema)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "migrate widget schema "+schema+": begin", (*ops)[1])
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	set := widgets()
	set.Name, set.Outdated = "", nil
	err := set.Check(ctx, pool, schema)
	require.ErrorIs(t, err, pgmigrate.ErrSchemaOutdated)
	require.ErrorContains(t, err, "check schema "+schema+": ")

	set.LockKey = ""
	_, err = set.Apply(ctx, pool, schema)
	require.ErrorContains(t, err, "LockKey")
}

// TestSchemaNames: a name Postgres would truncate or reject is refused
// before anything reaches the database (db is nil).
func TestSchemaNames(t *testing.T) {
	t.Parallel()
	require.NoError(t, pgmigrate.ValidateSchemaName(strings.Repeat("s", pgmigrate.MaxSchemaNameLen)))
	for _, name := range []string{"", strings.Repeat("s", pgmigrate.MaxSchemaNameLen+1), "a\x00b"} {
		require.Error(t, pgmigrate.ValidateSchemaName(name), "%q", name)
		_, err := widgets().Apply(t.Context(), nil, name)
		require.Error(t, err, "%q", name)
		require.Error(t, widgets().Check(t.Context(), nil, name), "%q", name)
	}
}

// TestConcurrentApply: concurrent Apply calls on one schema serialize;
// exactly one applies the migrations.
func TestConcurrentApply(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	const migrators = 4
	applied := make([][]int, migrators)
	errs := make([]error, migrators)
	var wg sync.WaitGroup
	for i := range migrators {
		wg.Go(func() { applied[i], errs[i] = widgets().Apply(t.Context(), pool, schema) })
	}
	wg.Wait()
	var appliers int
	for i := range migrators {
		require.NoError(t, errs[i])
		if len(applied[i]) > 0 {
			appliers++
			require.Equal(t, []int{1, 2}, applied[i])
		}
	}
	require.Equal(t, 1, appliers)
}

// TestReleasedLockKeys: each package's Migrate waits for the advisory lock
// that released binaries take, written out here as they took it, so an old
// and a new binary migrating one schema still serialize.
func TestReleasedLockKeys(t *testing.T) {
	t.Parallel()
	hashText := widgets()
	hashText.LockHash = pgmigrate.HashText
	for name, tc := range map[string]struct {
		hash    string // the lock id's SQL, $1 the key
		prefix  string
		migrate func(context.Context, *pgxpool.Pool, string) ([]int, error)
	}{
		"event store": {`hashtext($1)`, "opledger.migrate:",
			func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
				return postgres.Migrate(ctx, pool, schema)
			}},
		"read models": {`hashtextextended($1, 0)`, "opledger.projections.migrate:",
			func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
				return projections.Migrate(ctx, pool, schema)
			}},
		"transport": {`hashtextextended($1, 0)`, "opledger.transport.migrate:",
			func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
				return pgstate.Migrate(ctx, pool, schema)
			}},
		"HashText": {`hashtext($1)`, "pgmigrate.test:",
			func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
				return hashText.Apply(ctx, pool, schema)
			}},
		"HashTextExtended": {`hashtextextended($1, 0)`, "pgmigrate.test:",
			func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
				return widgets().Apply(ctx, pool, schema)
			}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url, schema := pgtest.Schema(t)
			pool := openPool(t, url)
			key := tc.prefix + schema

			holder, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = holder.Rollback(context.WithoutCancel(ctx)) }()
			var id int64
			require.NoError(t, holder.QueryRow(ctx, `SELECT `+tc.hash+`::bigint`, key).Scan(&id))
			_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, id)
			require.NoError(t, err)

			done := make(chan error, 1)
			go func() {
				applied, err := tc.migrate(ctx, pool, schema)
				if err == nil && len(applied) == 0 {
					err = errors.New("applied nothing to a fresh schema")
				}
				done <- err
			}()
			waitForLockWaiter(t, pool, id, done)
			require.NoError(t, holder.Commit(ctx))
			require.NoError(t, <-done)
		})
	}
}

// waitForLockWaiter returns once some session waits for advisory lock id,
// and fails the test if done reports first (the migration did not wait) or
// nobody waits within a bound.
func waitForLockWaiter(t *testing.T, pool *pgxpool.Pool, id int64, done <-chan error) {
	t.Helper()
	// pg_locks shows a bigint advisory key as its high and low 32 bits.
	classid, objid := int64(uint64(id)>>32), int64(uint32(id))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		var waiting bool
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
			  AND classid::bigint = $1 AND objid::bigint = $2)`, classid, objid).Scan(&waiting))
		if waiting {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("migrate finished (err %v) without waiting for the released lock", err)
		case <-deadline:
			t.Fatal("no session waited for the released lock within 30s")
		case <-tick.C:
		}
	}
}
