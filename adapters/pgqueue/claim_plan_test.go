package pgqueue

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
)

// A claim checks each candidate's key against the earlier ready rows by an
// index lookup of that key, whatever the table's statistics say: a queue
// table analyzed while empty (or never), then handed a burst, is what a
// deployment meets. As an anti-join, such a table got a plan that scanned
// every ready row of the topic for each candidate, making a claim's cost
// grow with the backlog. The plans checked are the generic ones, those a
// prepared statement keeps.
func TestClaimLooksUpEachKeyByIndex(t *testing.T) {
	t.Parallel()
	for _, analyzed := range []bool{false, true} {
		t.Run(map[bool]string{false: "never analyzed", true: "analyzed while empty"}[analyzed], func(t *testing.T) {
			t.Parallel()
			rig := transporttest.New(t) // a transport schema just migrated
			pool := rig.Pool
			if analyzed {
				_, err := pool.Exec(t.Context(), "ANALYZE "+pgx.Identifier{rig.Schema, "messages"}.Sanitize())
				require.NoError(t, err)
			}
			q, err := New(Config{DB: pool, Schema: rig.Schema, WorkerID: "w"})
			require.NoError(t, err)
			burst := make([]transport.Outbound, 2000)
			for i := range burst {
				burst[i] = transport.Outbound{Topic: transport.TopicRefundRequests, MessageID: fmt.Sprintf("M-%d", i), Key: fmt.Sprintf("OP-%d", i), Value: []byte("{}")}
			}
			require.NoError(t, q.Publish(t.Context(), burst))

			conn, err := pool.Acquire(t.Context())
			require.NoError(t, err)
			defer conn.Release()
			_, err = conn.Exec(t.Context(), "SET plan_cache_mode = force_generic_plan")
			require.NoError(t, err)
			for name, acks := range map[string][]*pendingAck{"claim": nil, "claim acknowledging": {{c: Claimed{ID: 1, Attempt: 1}}}} {
				sql, args := q.claimStatement("w", 32, acks)
				rows, err := conn.Query(t.Context(), "EXPLAIN "+sql, args...)
				require.NoError(t, err)
				lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err)
				plan := strings.Join(lines, "\n")
				require.Regexp(t, `Index Cond: \(.*\(key = m(_\d+)?\.key\)`, plan, "%s: the key's earlier rows by index\n%s", name, plan)
				require.NotRegexp(t, `Join Filter: .*key = `, plan, "%s: no candidate compared with every ready row\n%s", name, plan)
				require.NotContains(t, plan, "Seq Scan", "%s\n%s", name, plan)
			}
		})
	}
}
