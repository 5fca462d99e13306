package projections_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/projections"
)

// Every example query in docs/projections.md is shown there verbatim and
// answers what it says over a history written at known distances from the
// server's now().
func TestExampleQueries(t *testing.T) {
	t.Parallel()
	realNow := time.Now().UTC().Truncate(time.Second)
	e := newEnv(t, realNow.Add(-30*time.Hour))

	old := e.request("OP-OLD", 1_000) // 30 h ago: completed and replayed
	xo := old.execute("MSG-OLD1")
	old.record(xo, domain.Completed, "re_old")
	capOld := e.capabilityOf(old, xo)
	old.claim("MSG-OLD2", capOld) // a replay signal older than 24 h

	e.clock.Advance(27 * time.Hour) // 3 h ago
	stuck := e.request("OP-STUCK", 2_000)
	stuck.record(stuck.execute("MSG-S1"), domain.Unknown, "")
	esc := e.request("OP-ESC", 3_000)
	xe := esc.execute("MSG-E1")
	esc.record(xe, domain.Unknown, "")
	esc.escalate(xe)
	r := e.request("OP-R", 4_000)
	xr := r.execute("MSG-R1")
	r.record(xr, domain.Completed, "re_r")
	capR := e.capabilityOf(r, xr)
	r.claim("MSG-R2", capR) // replay
	r.claim("MSG-R2", capR) // its duplicate delivery: not a second signal
	r.claim("MSG-R3", capR) // replay
	old.claim("MSG-OLD3", capOld)
	retry := e.request("OP-RETRY", 5_000)
	retry.record(retry.execute("MSG-T1"), domain.NotApplied, "")
	retry.execute("MSG-T2")

	e.clock.Advance(170 * time.Minute) // 10 min ago
	recent := e.request("OP-RECENT", 6_000)
	recent.record(recent.execute("MSG-N1"), domain.Unknown, "")
	dl := e.requestExport("OP-DL") // three downloads, one taken: two left, for 5 more minutes
	capDL := dl.allowDownloads(3)
	dl.record(dl.claim("MSG-DL1", capDL).ExecutionID, domain.Completed, "dl_1")
	spent := e.requestExport("OP-DL-SPENT") // one download, taken: none left
	capSpent := spent.allowDownloads(1)
	spent.record(spent.claim("MSG-DS1", capSpent).ExecutionID, domain.Completed, "dl_2")
	e.catchUp()

	queries, err := projections.ExampleQueries()
	require.NoError(t, err)
	doc, err := os.ReadFile("../docs/projections.md")
	require.NoError(t, err)
	conn, err := pgx.Connect(t.Context(), e.url)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	_, err = conn.Exec(t.Context(), "SET search_path TO "+pgx.Identifier{e.schema}.Sanitize())
	require.NoError(t, err)

	run := func(q projections.ExampleQuery) [][]any {
		rows, err := conn.Query(t.Context(), q.SQL)
		require.NoError(t, err, q.Name)
		out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
		require.NoError(t, err, q.Name)
		return out
	}
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.Name] = true
		require.Contains(t, string(doc), strings.TrimSpace(q.SQL), "docs/projections.md shows %s.sql verbatim", q.Name)
		got := run(q)
		switch q.Name {
		case "stuck_unknown":
			require.Len(t, got, 1)
			require.Equal(t, "OP-STUCK", got[0][0])
		case "replay_signals":
			var msgs []string
			for _, row := range got {
				msgs = append(msgs, row[0].(string))
				require.Equal(t, int64(1), row[1], "signals of %s", row[0])
			}
			require.Equal(t, []string{"MSG-OLD3", "MSG-R2", "MSG-R3"}, msgs)
		case "multiple_executions":
			require.Len(t, got, 2)
			for i, row := range got {
				require.Equal(t, "OP-RETRY", row[0])
				require.Equal(t, int32(2), row[2])
				require.Equal(t, int32(i+1), row[4], "attempt")
			}
			require.Equal(t, "NotApplied", got[0][5])
			require.Equal(t, "Executing", got[1][5])
		case "refunds_by_state_and_day":
			want := map[string][2]int64{}
			for _, id := range []domain.OperationID{"OP-OLD", "OP-STUCK", "OP-ESC", "OP-R", "OP-RETRY", "OP-RECENT"} {
				s, err := e.h.Load(t.Context(), id)
				require.NoError(t, err)
				k := fmt.Sprintf("%s %s %s", s.CreatedAt.UTC().Format(time.DateOnly), s.Status(), s.Currency)
				w := want[k]
				want[k] = [2]int64{w[0] + 1, w[1] + s.AmountMinor}
			}
			have := map[string][2]int64{}
			for _, row := range got {
				day := row[0].(time.Time)
				sum := row[4]
				amount, err := numericToInt(sum)
				require.NoError(t, err)
				have[fmt.Sprintf("%s %s %s", day.Format(time.DateOnly), row[1], row[2])] = [2]int64{row[3].(int64), amount}
			}
			require.Equal(t, want, have)
		case "export_uses_left":
			require.Len(t, got, 1, "the spent export and every refund are left out")
			require.Equal(t, []any{"OP-DL", "EXP-OP-DL", string(capDL), int32(3), int32(1), int32(2)}, got[0][:6])
		default:
			t.Fatalf("no test for example query %s", q.Name)
		}
	}
	require.Len(t, seen, 5)
}

// numericToInt reads sum(bigint), a numeric, as an int64.
func numericToInt(v any) (int64, error) {
	n, ok := v.(interface{ Int64Value() (pgtype.Int8, error) })
	if !ok {
		return 0, fmt.Errorf("%T is not a numeric", v)
	}
	i, err := n.Int64Value()
	return i.Int64, err
}
