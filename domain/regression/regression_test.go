package regression_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/regression"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

var start = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

func seen(stream string, version int64) eventstore.Regression {
	return eventstore.Regression{Cache: domain.CacheState, Stream: stream, SeenVersion: version, SeenEventID: fmt.Sprintf("ev-%s-%d", stream, version),
		HeldVersion: version - 2, Detail: "went back",
		Context: []domain.SeenExecution{{ExecutionID: "EXE-1.1", IdempotencyKey: "refund-OP-1-a1", State: domain.ExecExecuting}}}
}

func recorded(t *testing.T, s eventstore.Store) []domain.LogRegressed {
	t.Helper()
	events, err := s.ReadStream(context.Background(), domain.RegressionStream, 0, 1000)
	require.NoError(t, err)
	var out []domain.LogRegressed
	for _, e := range events {
		d, err := codec.DecodeRecorded(e)
		require.NoError(t, err)
		if ev, ok := d.Event.(domain.LogRegressed); ok {
			out = append(out, ev)
		}
	}
	return out
}

func newRecorder(t *testing.T, s eventstore.Store, c clock.Clock, noticer string, counted map[string]int) *regression.Recorder {
	r, err := regression.NewRecorder(regression.RecorderConfig{Store: s, Noticer: noticer, Clock: c,
		OnNoticed: func(cache string) { counted[cache]++ }, MaxRecorded: 3, Window: time.Minute})
	require.NoError(t, err)
	return r
}

// TestRecorderRecordsEachRegressionOnce: what two caches, or two
// processes, saw alike is one LogRegressed; every notice is counted; the
// event says what was seen and what the store holds.
func TestRecorderRecordsEachRegressionOnce(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	c := clock.NewManual(start)
	counted := map[string]int{}
	serve, worker := newRecorder(t, s, c, "serve", counted), newRecorder(t, s, c, "worker-1", counted)
	wake := serve.Wake()

	serve.ObserveRegression(ctx, seen("operation-OP-1", 5))
	head := seen("operation-OP-1", 5)
	head.Cache = domain.CacheHead
	serve.ObserveRegression(ctx, head)
	worker.ObserveRegression(ctx, seen("operation-OP-1", 5))
	worker.ObserveRegression(ctx, seen("operation-OP-2", 3))

	select {
	case <-wake:
	default:
		t.Fatal("a notice wakes whoever waits")
	}
	require.Equal(t, map[string]int{domain.CacheState: 3, domain.CacheHead: 1}, counted, "every notice counted, by cache")
	require.Equal(t, uint64(2), serve.Noticed())
	got := recorded(t, s)
	require.Len(t, got, 2, "one event per stream and version seen, whoever saw it")
	require.Equal(t, domain.LogRegressed{Cache: domain.CacheState, Noticer: "serve", Stream: "operation-OP-1", SeenVersion: 5,
		SeenEventID: "ev-operation-OP-1-5", HeldVersion: 3, Detail: "went back",
		SeenExecutions: []domain.SeenExecution{{ExecutionID: "EXE-1.1", IdempotencyKey: "refund-OP-1-a1", State: domain.ExecExecuting}},
		NoticedAt:      start}, got[0])
	require.Equal(t, "worker-1", got[1].Noticer)
}

// TestRecorderIsBounded: beyond MaxRecorded per window, regressions are
// counted, and the next event recorded carries the count; an append the
// store refuses is kept and recorded later.
func TestRecorderIsBounded(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	c := clock.NewManual(start)
	counted := map[string]int{}
	r := newRecorder(t, s, c, "serve", counted)
	for v := range 10 {
		r.ObserveRegression(ctx, seen("operation-OP-1", int64(v+2)))
	}
	require.Len(t, recorded(t, s), 3, "MaxRecorded per window")
	require.Equal(t, 10, counted[domain.CacheState])

	c.Advance(time.Minute)
	s.SetUnavailable(true)
	r.ObserveRegression(ctx, seen("operation-OP-2", 7))
	s.SetUnavailable(false)
	require.Len(t, recorded(t, s), 3, "not written while the store is down")
	require.NoError(t, r.Flush(ctx))
	got := recorded(t, s)
	require.Len(t, got, 4, "kept, and recorded once the store answers")
	require.Equal(t, "operation-OP-2", got[3].Stream)
	require.Equal(t, int64(7), got[3].Unrecorded, "the seven beyond the bound are counted in the next event")
}

// TestMonitorUntilAcknowledged: a recorded regression is unacknowledged,
// in every process that reads the stream, until an operator acknowledges
// it; one recorded after is unacknowledged again.
func TestMonitorUntilAcknowledged(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	c := clock.NewManual(start)
	m, err := regression.NewMonitor(regression.MonitorConfig{Store: s, Clock: c})
	require.NoError(t, err)
	require.NoError(t, m.Refresh(ctx))
	require.False(t, m.Status().Alarm())
	_, err = m.Acknowledge(ctx, "ops-anna", "nothing to see")
	require.ErrorIs(t, err, regression.ErrNothingToAcknowledge)

	r := newRecorder(t, s, c, "worker-1", map[string]int{})
	r.ObserveRegression(ctx, seen("operation-OP-1", 5))
	r.ObserveRegression(ctx, seen("operation-OP-2", 4))
	require.NoError(t, m.Refresh(ctx))
	st := m.Status()
	require.True(t, st.Alarm())
	require.Equal(t, int64(2), st.Unacknowledged)
	require.Equal(t, "operation-OP-2", st.Recent[0].Stream, "newest first")
	require.Contains(t, st.Summary(), "log regression unacknowledged: 2")

	var refusal *domain.Refusal
	_, err = m.Acknowledge(ctx, "ops-anna", "")
	require.True(t, errors.As(err, &refusal))
	require.Equal(t, "note", refusal.Field)
	ack, err := m.Acknowledge(ctx, "ops-anna", "failover at 14:02; provider checked")
	require.NoError(t, err)
	require.Equal(t, int64(2), ack.Regressions)
	require.Equal(t, int64(1), ack.Through)
	require.False(t, m.Status().Alarm())

	other, err := regression.NewMonitor(regression.MonitorConfig{Store: s, Clock: c})
	require.NoError(t, err)
	require.NoError(t, other.Refresh(ctx))
	require.False(t, other.Status().Alarm(), "another process reads the acknowledgement")
	require.Equal(t, "ops-anna", other.Status().LastAcknowledged.Operator)

	r.ObserveRegression(ctx, seen("operation-OP-3", 9))
	require.NoError(t, other.Refresh(ctx))
	require.Equal(t, int64(1), other.Status().Unacknowledged, "a regression after the acknowledgement is unacknowledged")
	require.Equal(t, int64(3), other.Status().Total)
}

// TestMonitorNoticesItsStreamGoingBack: the regression stream can lose
// its latest events too; the monitor reads it again and says so.
func TestMonitorNoticesItsStreamGoingBack(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	c := clock.NewManual(start)
	var told []eventstore.Regression
	m, err := regression.NewMonitor(regression.MonitorConfig{Store: s, Clock: c,
		Regressions: eventstore.RegressionObserverFunc(func(_ context.Context, r eventstore.Regression) { told = append(told, r) })})
	require.NoError(t, err)
	r := newRecorder(t, s, c, "serve", map[string]int{})
	r.ObserveRegression(ctx, seen("operation-OP-1", 5))
	r.ObserveRegression(ctx, seen("operation-OP-2", 5))
	require.NoError(t, m.Refresh(ctx))
	require.Equal(t, int64(2), m.Status().Unacknowledged)

	s.LoseLast(1)
	require.NoError(t, m.Refresh(ctx))
	require.Equal(t, int64(1), m.Status().Unacknowledged, "read again from the start")
	require.Len(t, told, 1)
	require.Equal(t, domain.CacheRegressionStream, told[0].Cache)
	require.Equal(t, int64(1), told[0].SeenVersion)
}

// TestMonitorLogsWhatAnotherProcessNoticed: a process whose own caches saw
// nothing (a worker) still says so once its monitor reads a regression
// another process recorded, naming who noticed; a read that finds nothing
// new says nothing.
func TestMonitorLogsWhatAnotherProcessNoticed(t *testing.T) {
	s := memory.New(func() time.Time { return start })
	c := clock.NewManual(start)
	rec := newRecorder(t, s, c, "serve", map[string]int{})
	rec.ObserveRegression(t.Context(), seen("operation-OP-1", 4))

	var logged bytes.Buffer
	m, err := regression.NewMonitor(regression.MonitorConfig{Store: s, Clock: c, Regressions: rec,
		Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	require.NoError(t, err)
	require.NoError(t, m.Refresh(t.Context()))
	require.Contains(t, logged.String(), `"level":"ERROR","msg":"LOG REGRESSION recorded`)
	require.Contains(t, logged.String(), `"latest_noticer":"serve"`)
	n := strings.Count(logged.String(), "\n")
	require.NoError(t, m.Refresh(t.Context()))
	require.Equal(t, n, strings.Count(logged.String(), "\n"), "nothing new, nothing said")
}
