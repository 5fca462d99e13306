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
	"opledger/domain/codec/codectest"
	"opledger/eventstore"
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

// onEveryLogFixture runs f on every backend for every log fixture (logs
// earlier builds wrote, frozen in domain/codec/codectest), appended to a
// fresh store.
func onEveryLogFixture(t *testing.T, f func(t *testing.T, store eventstore.Store, n int64)) {
	names, err := codectest.Logs()
	require.NoError(t, err)
	require.NotEmpty(t, names)
	onEveryBackendShared(t, func(t *testing.T, open func(t *testing.T) eventstore.Store) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				_, log, err := codectest.Log(name)
				require.NoError(t, err)
				store := open(t)
				require.NoError(t, codectest.AppendLog(t.Context(), store, log))
				waitVisible(t, store, int64(len(log)))
				f(t, store, int64(len(log)))
			})
		}
	})
}

// TestVerifyReadsTheLogsEarlierBuildsWrote: audit verify over each frozen
// log (the story as main wrote it before leases were bound to their
// holder, and as it wrote it before schema evolution) finds what it finds
// in the story this build writes: no violation, the same executions, the
// same open Unknowns.
func TestVerifyReadsTheLogsEarlierBuildsWrote(t *testing.T) {
	onEveryLogFixture(t, func(t *testing.T, store eventstore.Store, n int64) {
		rep := verify(t, store, n, audit.VerifyOptions{})
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		require.True(t, rep.OK(), text.String())
		require.Equal(t, n, rep.Events)
		require.Equal(t, int64(1), rep.EvidenceEvents)
		require.Equal(t, int64(len(storyOperations)), rep.Operations)
		require.Equal(t, audit.ExecutionCounts{Executing: 1, Completed: 4, NotApplied: 1, Unknown: 1, Escalated: 1}, rep.Executions)
		require.Equal(t, int64(2), rep.OpenUnknownCount)
		require.Equal(t, opOpen, rep.OpenUnknowns[0].Operation)
		require.Equal(t, opEscalated, rep.OpenUnknowns[1].Operation)
		require.Zero(t, rep.IgnoredMembers, "this build knows every member earlier builds wrote")
	})
}

// TestReplayReadsTheLogsEarlierBuildsWrote: audit replay renders OP-4471
// from each frozen log as the seed's timeline, exactly as the builds that
// wrote them did (testdata/thursday-earlier.txt: their evidence is in the
// operation's stream; this build's story keeps it in the evidence stream,
// testdata/thursday.txt, the same rows in the same order).
func TestReplayReadsTheLogsEarlierBuildsWrote(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "thursday-earlier.txt"))
	require.NoError(t, err)
	onEveryLogFixture(t, func(t *testing.T, store eventstore.Store, _ int64) {
		rows, err := audit.Replay(t.Context(), store, opThursday)
		require.NoError(t, err)
		var text bytes.Buffer
		require.NoError(t, audit.WriteTimelineText(&text, opThursday, rows))
		require.Equal(t, string(want), text.String())
		for _, op := range storyOperations {
			_, err := audit.Replay(t.Context(), store, op)
			require.NoError(t, err, "replay %s", op)
		}
	})
}

// TestVerifyReportsMembersItReadPast: an event holding a member this build
// does not know (a newer build's additive field) is read past, not a
// violation, and the report says so.
func TestVerifyReportsMembersItReadPast(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		h := newHistory(t, store, "OP-1")
		h.claimed()
		h.raw(domain.TypeLeaseRenewed, `{"execution_id":"EXE-1","lease_epoch":1,"lease_expires_at":"2026-11-26T14:04:10Z","renewed_at":"2026-11-26T14:03:10Z","renewal_reason":"still working"}`)
		rep := verify(t, store, h.next, audit.VerifyOptions{})
		require.True(t, rep.OK(), "%+v", rep.Violations)
		require.Equal(t, int64(1), rep.IgnoredMembers)
		require.Equal(t, "operation-OP-1@4 data.renewal_reason", rep.FirstIgnored)
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		require.Contains(t, text.String(), "members this build does not know, read past (information): 1 events, first operation-OP-1@4 data.renewal_reason")
	})
}
