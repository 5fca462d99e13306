package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/eventstore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	require.Equal(t, string(want), string(got))
}

// TestReplayReadsLikeTheThursdayTimeline renders OP-4471's stream, written
// by the real handler, sweeper and reconciler, as the seed's timeline.
func TestReplayReadsLikeTheThursdayTimeline(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		newStory(t, store).write()
		rows, err := audit.Replay(context.Background(), store, opThursday)
		require.NoError(t, err)
		var text bytes.Buffer
		require.NoError(t, audit.WriteTimelineText(&text, opThursday, rows))
		golden(t, "thursday.txt", text.Bytes())

		for i, r := range rows {
			require.Equal(t, int64(i), r.Version)
			require.NotEmpty(t, r.Position)
		}
		var js bytes.Buffer
		require.NoError(t, audit.WriteTimelineJSON(&js, opThursday, rows))
		var doc audit.TimelineJSON
		require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
		require.Equal(t, rows, doc.Rows)
		require.Equal(t, len(rows), doc.Events)
	})
}

func TestReplayFailsLoudly(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		_, err := audit.Replay(context.Background(), store, "OP-NONE")
		require.ErrorIs(t, err, audit.ErrNoSuchOperation)

		h := newHistory(t, store, "OP-1")
		h.claimed()
		h.raw(domain.TypeOutcomeRecorded, `{"execution_id":"EXE-1","lease_epoch":"one"}`)
		_, err = audit.Replay(context.Background(), store, "OP-1")
		require.ErrorContains(t, err, "operation-OP-1@4")
		require.ErrorContains(t, err, "lease_epoch")

		h = newHistory(t, store, "OP-2")
		h.claimed()
		h.rawAt(domain.TypeOutcomeRecorded, 2, `{"execution_id":"EXE-1"}`)
		_, err = audit.Replay(context.Background(), store, "OP-2")
		require.ErrorIs(t, err, codec.ErrNewerVersion)
		require.ErrorContains(t, err, "operation-OP-2@4")
	})
}
