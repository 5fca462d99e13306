package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/codec/codectest"
	"opledger/eventstore/postgres/pgtest"
)

// `opledger audit verify` and `opledger audit replay` read the logs earlier
// builds wrote (frozen in domain/codec/codectest): verify passes, replay
// renders the seed's timeline as those builds did (their evidence is in the
// operation's stream: domain/audit/testdata/thursday*-earlier.txt).
func TestAuditCommandsReadTheLogsEarlierBuildsWrote(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "domain", "audit", "testdata", "thursday-earlier.txt"))
	require.NoError(t, err)
	want120, err := os.ReadFile(filepath.Join("..", "..", "domain", "audit", "testdata", "thursday-120-earlier.txt"))
	require.NoError(t, err)
	names, err := codectest.Logs()
	require.NoError(t, err)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, log, err := codectest.Log(name)
			require.NoError(t, err)
			url, schema := pgtest.Schema(t)
			store := pgtest.OpenMigrated(t, url, schema)
			require.NoError(t, codectest.AppendLog(t.Context(), store, log))
			deadline := time.Now().Add(30 * time.Second) // Postgres withholds the log while an older transaction on the server is open
			for {
				recs, err := store.ReadAll(t.Context(), nil, len(log))
				require.NoError(t, err)
				if len(recs) == len(log) {
					break
				}
				require.True(t, time.Now().Before(deadline), "the log shows %d of %d events", len(recs), len(log))
				time.Sleep(10 * time.Millisecond) // polling a condition with a bound
			}
			cli := func(args ...string) (int, string, string) {
				var stdout, stderr bytes.Buffer
				code := run(context.WithoutCancel(t.Context()), append(args, "--database-url", url, "--store-schema", schema), &stdout, &stderr)
				return code, stdout.String(), stderr.String()
			}
			code, out, errOut := cli("audit", "verify")
			require.Equal(t, 0, code, out+errOut)
			require.Contains(t, out, "audit verify: OK")
			require.Contains(t, out, fmt.Sprintf("events: %d (", len(log)))
			code, out, errOut = cli("audit", "replay", "OP-4471", "--wide")
			require.Equal(t, 0, code, errOut)
			require.Equal(t, strings.TrimSpace(string(want)), strings.TrimSpace(out))
			code, out, errOut = cli("audit", "replay", "OP-4471") // the default: 120 columns
			require.Equal(t, 0, code, errOut)
			require.Equal(t, strings.TrimSpace(string(want120)), strings.TrimSpace(out))
		})
	}
}
