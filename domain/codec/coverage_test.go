package codec_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/domain/codec/codectest"
	"opledger/domain/feed"
	"opledger/domain/recovery"
	"opledger/projections"
)

// TestEveryEventTypeIsHandledEverywhere is the one table over every
// registered event type that a new type, or a consumer that forgot one,
// fails: each type's sample (a) round-trips through the codec as its
// golden fixture holds it, and has an explicit case (acting on it, or
// ignoring it on purpose; never a default branch) in (b) Evolve, (c) the
// read models' fold, (d) audit verify's checks, the timeline and the
// provider diff, (e) the recovery log index, (f) the operation feed.
func TestEveryEventTypeIsHandledEverywhere(t *testing.T) {
	samples := map[string]domain.Event{}
	for _, e := range codectest.Samples() {
		_, dup := samples[e.EventType()]
		require.False(t, dup, "two samples of %s", e.EventType())
		_, registered := codec.Lookup(e.EventType())
		require.True(t, registered, "sample of %s, which is not registered in domain/codec/registry.go", e.EventType())
		samples[e.EventType()] = e
	}
	consumers := []struct {
		name    string
		handles func(domain.Event) bool
		where   string
	}{
		{"Evolve", evolves, "domain/state.go (Operation.Evolve)"},
		{"read models", projections.Folds, "projections/fold.go (foldOperationEvent, foldExecutionEvent)"},
		{"audit verify", audit.Checks, "domain/audit/verifier.go (verifier.apply)"},
		{"timeline", audit.Describes, "domain/audit/timeline_rows.go (describe)"},
		{"provider diff", audit.DiffReads, "domain/audit/diff_reads.go (diffReading) and diff.go (ledgerEvent)"},
		{"recovery index", recovery.Indexes, "domain/recovery/logindex.go (LogIndex.apply)"},
		{"operation feed", feed.Maps, "domain/feed/change.go (change)"},
	}
	for _, k := range codec.Kinds() {
		t.Run(k.Type, func(t *testing.T) {
			e, ok := samples[k.Type]
			require.True(t, ok, "no sample of %s: add one to domain/codec/codectest/samples.go", k.Type)

			t.Run("codec", func(t *testing.T) {
				f, err := codectest.FixtureOf(k.Type, k.Current)
				require.NoError(t, err, "run go test ./domain/codec/codectest -run TestGolden -update")
				current, err := codec.NewRegistry(k.Writes(k.Current))
				require.NoError(t, err)
				enc, err := current.Encode(e, domain.Metadata{})
				require.NoError(t, err)
				require.Equal(t, k.Current, enc.Version)
				require.Equal(t, string(f.Data), string(enc.Data), "written as its fixture holds it")
				d, err := codec.Decode(f.Type, f.Data, f.Metadata)
				require.NoError(t, err)
				require.Equal(t, e, d.Event, "its fixture reads back as the sample")
				require.Empty(t, d.Ignored)
			})
			for _, c := range consumers {
				t.Run(c.name, func(t *testing.T) {
					require.True(t, c.handles(e), "%s has no case for %s: add one to %s (an explicit case that ignores it, if it does not bear on it)", c.name, k.Type, c.where)
				})
			}
		})
	}
}

// evolves reports whether Evolve has a case for e's type: e applied to a
// requested operation does not reach Evolve's default branch (an event
// Evolve refuses for its content, an outcome for an execution never
// claimed, has a case).
func evolves(e domain.Event) bool {
	o := domain.NewOperation()
	if err := o.Evolve(domain.OperationRequested{OperationID: "OP-COVERAGE"}); err != nil {
		return false
	}
	return !errors.Is(o.Evolve(e), domain.ErrUnhandledEvent)
}
