package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

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

		next := map[string]int64{}
		for _, r := range rows {
			require.Equal(t, next[r.Stream], r.Version, "each stream's rows in version order")
			next[r.Stream]++
			require.NotEmpty(t, r.Position)
		}
		require.Equal(t, map[string]int64{"": 7, domain.EvidenceStreamOf(opThursday): 3}, next,
			"the operation's stream holds its state, its evidence stream the duplicate, the refused write and the replay")
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

// TestReplayFitsATerminal: the default table of the Thursday story fits
// 120 columns (the wide one is 390 and more), keeps every event and every
// detail (wrapped, not cut), and reads as the golden file.
func TestReplayFitsATerminal(t *testing.T) {
	store := newMemoryStore()
	newStory(t, store).write()
	rows, err := audit.Replay(context.Background(), store, opThursday)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, audit.WriteTimelineTable(&text, opThursday, rows, 0))
	golden(t, "thursday-120.txt", text.Bytes())
	joined := strings.Join(strings.Fields(text.String()), " ")
	for _, line := range strings.Split(text.String(), "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), audit.DefaultTableWidth, "line %q", line)
	}
	for _, r := range rows {
		require.Contains(t, text.String(), r.Event)
		// Details wrap at spaces: every word of every detail is there.
		require.Contains(t, joined, strings.Join(strings.Fields(r.Detail), " "), "detail of version %d", r.Version)
	}
	require.Contains(t, text.String(), "Fri 2026-11-27 (UTC)", "a new day is named")

	var narrow bytes.Buffer
	require.NoError(t, audit.WriteTimelineTable(&narrow, opThursday, rows, 80))
	for _, line := range strings.Split(narrow.String(), "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), 80, "line %q", line)
	}
	require.Contains(t, narrow.String(), "…", "cells elided at 80 columns")
}

// TestSequenceOfTheStory: the lane model shows the README's story — the
// parties as lanes, the lapse to Unknown, the reconciliation through the
// provider and the Friday refusal with replay suspected — and the Mermaid
// rendering draws exactly those arrows.
func TestSequenceOfTheStory(t *testing.T) {
	store := newMemoryStore()
	newStory(t, store).write()
	rows, err := audit.Replay(context.Background(), store, opThursday)
	require.NoError(t, err)
	seq := audit.SequenceOf(rows)
	var lanes []string
	for _, l := range seq.Lanes {
		lanes = append(lanes, l.Title)
	}
	require.Equal(t, []string{"agent / API", "queue", "worker-a", "worker-b", "worker-c", "ledger", "sweeper", "reconciler", "provider"}, lanes)

	find := func(event, from, to string) audit.Step {
		t.Helper()
		for _, s := range seq.Steps {
			if s.Event == event && s.From == from && s.To == to {
				return s
			}
		}
		t.Fatalf("no step of %s to %s", event, to)
		return audit.Step{}
	}
	lapsed := find("LeaseLapsed", "sweeper", "ledger")
	require.Equal(t, audit.ToneWarn, lapsed.Tone)
	require.Contains(t, lapsed.Label, "Unknown, epoch 1→2")
	require.Equal(t, "look up by operation id", find("Reconciled", "reconciler", "provider").Label)
	require.Equal(t, "found re_sim00000001", find("Reconciled", "provider", "reconciler").Label)
	require.Equal(t, audit.ToneOK, find("Reconciled", "reconciler", "ledger").Tone)
	friday := find("PresentationRejected", "ledger", "worker:worker-c")
	require.Equal(t, audit.StepRefused, friday.Style)
	require.Equal(t, audit.ToneAlert, friday.Tone)
	require.Contains(t, friday.Label, "AlreadyConsumed (capability.already-consumed), replay suspected")
	call := find("Claimed", "worker:worker-a", "provider")
	require.Equal(t, audit.StepInferred, call.Style, "the provider call is implied, never recorded")
	require.Contains(t, call.Label, "refund-OP-4471-a1")
	// Steps keep the history's order.
	for i := 1; i < len(seq.Steps); i++ {
		require.LessOrEqual(t, seq.Steps[i-1].Row, seq.Steps[i].Row)
	}

	var m bytes.Buffer
	require.NoError(t, audit.WriteTimelineMermaid(&m, opThursday, rows))
	golden(t, "thursday.mermaid", m.Bytes())
	arrows := 0
	for _, line := range strings.Split(m.String(), "\n") {
		if strings.Contains(line, "->>") || strings.Contains(line, "-x") {
			arrows++
		}
	}
	require.Equal(t, len(seq.Steps), arrows, "one Mermaid arrow per step")
	require.NotContains(t, strings.SplitN(m.String(), "\n", 3)[2], ";", "no raw ';' ends a statement early")
}
