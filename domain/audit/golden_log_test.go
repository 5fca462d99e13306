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

	"opledger/domain/codec/codectest"
	"opledger/eventstore/memory"
)

// freezeLog names a log fixture to write from the story (never over one
// that exists: log fixtures are frozen history).
var freezeLog = flag.String("freeze-log", "", "write the story's log as log fixture NAME under domain/codec/codectest/testdata/logs")

// storyLogWrittenBy names the code that writes the story log fixture.
const storyLogWrittenBy = "opledger main@f42e6e8, before schema evolution: the real command handler, sweeper and reconciler playing domain/audit's story on the memory store (go test ./domain/audit -run TestFreezeStoryLog -freeze-log NAME)"

// TestFreezeStoryLog writes the story's log as a log fixture when asked to
// (-freeze-log NAME); otherwise it checks that the story still covers what
// the frozen story log covers: every event type.
func TestFreezeStoryLog(t *testing.T) {
	store := memory.New(nil)
	n := newStory(t, store).write()
	recs, err := store.ReadAll(context.Background(), nil, int(n)+1)
	require.NoError(t, err)
	require.Len(t, recs, int(n))
	if *freezeLog == "" {
		return
	}
	path := filepath.Join("..", "codec", "codectest", "testdata", "logs", *freezeLog+".jsonl")
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "%s exists: log fixtures are frozen, never rewritten", path)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	require.NoError(t, enc.Encode(codectest.LogHeader{Log: *freezeLog, WrittenBy: storyLogWrittenBy, Events: len(recs)}))
	for _, r := range recs {
		require.NoError(t, enc.Encode(codectest.LogEvent{Stream: r.StreamID, Version: r.Version, ID: r.ID, Type: r.Type,
			Metadata: r.Metadata, Data: r.Data}))
	}
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
	t.Logf("wrote %s (%d events)", path, len(recs))
}
