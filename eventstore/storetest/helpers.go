package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

// testContext bounds a whole sub-test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callBound)
	t.Cleanup(cancel)
	return ctx
}

// newEvents returns n events with fresh ids, JSON data numbering them from
// first, and JSON metadata.
func newEvents(n, first int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{
			ID:       uuid.NewString(),
			Type:     "Tested",
			Data:     fmt.Appendf(nil, `{"n":%d}`, first+i),
			Metadata: []byte(`{"correlation_id":"COR-1"}`),
		}
	}
	return out
}

// newStream returns a stream name no other test uses.
func newStream(prefix string) string { return prefix + "-" + uuid.NewString()[:8] }

func ids(events []eventstore.EventData) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func recordedIDs(events []eventstore.RecordedEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func versions(events []eventstore.RecordedEvent) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Version
	}
	return out
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// mustAppend appends and returns the next expected version.
func mustAppend(ctx context.Context, t *testing.T, s eventstore.Store, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) int64 {
	t.Helper()
	res, err := s.Append(ctx, stream, expected, events)
	require.NoError(t, err, "append %d events to %s at %s", len(events), stream, expected)
	return res.NextExpectedVersion
}

// requireWrongVersion asserts err is a *WrongExpectedVersionError for stream
// and expected that reports actual.
func requireWrongVersion(t *testing.T, err error, stream string, expected eventstore.ExpectedVersion, actual int64) {
	t.Helper()
	require.ErrorIs(t, err, eventstore.ErrWrongExpectedVersion)
	var wev *eventstore.WrongExpectedVersionError
	require.ErrorAs(t, err, &wev)
	require.Equal(t, stream, wev.Stream, "error's stream")
	require.Equal(t, expected, wev.Expected, "error's expected version")
	require.Equal(t, actual, wev.Actual, "error's actual version")
}

// readStream reads all of stream in pages of pageSize.
func readStream(ctx context.Context, t *testing.T, s eventstore.Store, stream string, pageSize int) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	// Bounded: a stream in these tests never holds more than 100,000 events.
	for range 100_000/pageSize + 2 {
		page, err := s.ReadStream(ctx, stream, int64(len(out)), pageSize)
		require.NoError(t, err, "read %s from %d", stream, len(out))
		require.LessOrEqual(t, len(page), pageSize)
		out = append(out, page...)
		if len(page) < pageSize {
			return out
		}
	}
	t.Fatalf("read %s: more pages than any test stream holds", stream)
	return nil
}

// waitReadAll reads the global log after `after` until it has at least n
// events, polling with a bounded back-off for at most visibleBound: a
// backend may withhold committed events while an older transaction (of any
// test sharing the server) is still open. It returns everything it read, in
// order.
func waitReadAll(ctx context.Context, t *testing.T, s eventstore.Store, after eventstore.Position, n int) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	deadline := time.Now().Add(visibleBound)
	pause := time.Millisecond
	for {
		page, err := s.ReadAll(ctx, after, 500)
		require.NoError(t, err, "read all")
		out = append(out, page...)
		if len(page) > 0 {
			after = page[len(page)-1].Position
			pause = time.Millisecond
		}
		if len(out) >= n {
			return out
		}
		if len(page) == 500 {
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("read all: %d of %d events visible after %s", len(out), n, visibleBound)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("read all: %v with %d of %d events visible", ctx.Err(), len(out), n)
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// requireIncreasing asserts the events' positions strictly increase and
// all lie after the start of the log.
func requireIncreasing(t *testing.T, events []eventstore.RecordedEvent) {
	t.Helper()
	for i, e := range events {
		require.Positive(t, e.Position.Compare(nil), "position %s of event %d must be after the start", e.Position, i)
		if i > 0 {
			require.Negative(t, events[i-1].Position.Compare(e.Position),
				"positions must increase: %s then %s", events[i-1].Position, e.Position)
			require.Positive(t, e.Position.Compare(events[i-1].Position))
		}
	}
}
