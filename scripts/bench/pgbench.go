package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// The baselines run by pgbench, on scratch tables of the bench database:
//   - insert1: one INSERT of one jsonb row per transaction
//     (scripts/pgbench-insert.sh's statement);
//   - insert10: one INSERT of ten such rows per transaction;
//   - selectInsert: a SELECT of a 3-row stream by key, then an INSERT, each
//     its own transaction: the shape of a full Claim (read the stream,
//     append).
const (
	pgbenchInsert1 = `INSERT INTO bench_scratch (payload) VALUES ('{"operation_id":"OP-4471","lease_epoch":1}');
`
	pgbenchInsert10 = `INSERT INTO bench_scratch (payload) VALUES ('{"operation_id":"OP-4471","lease_epoch":1}'), ('{"operation_id":"OP-4471","lease_epoch":2}'),
  ('{"operation_id":"OP-4471","lease_epoch":3}'), ('{"operation_id":"OP-4471","lease_epoch":4}'), ('{"operation_id":"OP-4471","lease_epoch":5}'),
  ('{"operation_id":"OP-4471","lease_epoch":6}'), ('{"operation_id":"OP-4471","lease_epoch":7}'), ('{"operation_id":"OP-4471","lease_epoch":8}'),
  ('{"operation_id":"OP-4471","lease_epoch":9}'), ('{"operation_id":"OP-4471","lease_epoch":10}');
`
	pgbenchSelectInsert = `\set s random(1, 10000)
SELECT version, payload FROM bench_scratch_streams WHERE stream_id = 's-' || :s ORDER BY version;
INSERT INTO bench_scratch (payload) VALUES ('{"operation_id":"OP-4471","lease_epoch":1}');
`
)

// preparePgbench creates the scratch tables (once per run).
func preparePgbench(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
CREATE TABLE IF NOT EXISTS bench_scratch (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS bench_scratch_streams (stream_id text NOT NULL, version bigint NOT NULL, payload jsonb NOT NULL, PRIMARY KEY (stream_id, version));
INSERT INTO bench_scratch_streams SELECT 's-' || s, v, '{"operation_id":"OP-4471","lease_epoch":1}' FROM generate_series(1, 10000) s, generate_series(0, 2) v
ON CONFLICT DO NOTHING;
ANALYZE bench_scratch_streams;`)
	return err
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// pgbench runs script with clients connections for about d (whole seconds,
// at least one) and returns its transactions per second. extra goes to
// pgbench as it is (such as "-M", "prepared").
func pgbench(ctx context.Context, s *settings, script string, clients int, d time.Duration, extra ...string) (float64, error) {
	f, err := os.CreateTemp("", "bench-*.sql")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		return 0, err
	}
	f.Close()
	secs := max(1, int(math.Round(d.Seconds())))
	threads := min(clients, 2)
	args := append([]string{"-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(secs)}, extra...)
	cmd := exec.CommandContext(ctx, s.pgbench, append(args, "-f", f.Name(), s.url)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, lastLines(out.String(), 5))
	}
	m := tpsLine.FindStringSubmatch(out.String())
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps: %s", lastLines(out.String(), 5))
	}
	return strconv.ParseFloat(m[1], 64)
}

func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}
