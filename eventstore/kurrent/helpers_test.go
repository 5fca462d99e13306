package kurrent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
)

// realServerEnv names the environment variable that points the tests at a
// real KurrentDB as well, e.g. esdb://127.0.0.1:2113?tls=false.
const realServerEnv = "KURRENTDB_URL"

// Timeouts of the stores the tests open. Outage stores time out sooner so
// that a subscription giving up after three failed reads stays well inside
// the conformance suite's bound (15s).
const (
	testCallTimeout      = 5 * time.Second
	testConnectTimeout   = 2 * time.Second
	outageCallTimeout    = time.Second
	outageConnectTimeout = time.Second
)

// target is a server the tests run against. Isolation between stores on
// one server comes from namespaces.
type target struct {
	name string
	// direct returns the connection string of a server for one test.
	direct func(t *testing.T) string
	// gated returns the connection string of a server for one test through
	// a gate the test may switch; the server's data outlives the gate's
	// modes.
	gated func(t *testing.T) (url string, gate *kurrenttest.Gate)
}

// testServer is the in-process server: a fresh one for every call.
var testServer = target{
	name:   "test-server",
	direct: func(t *testing.T) string { return kurrenttest.Start(t).DirectURL() },
	gated: func(t *testing.T) (string, *kurrenttest.Gate) {
		s := kurrenttest.Start(t)
		testServers.Store(s.Gate(), s)
		return s.URL(), s.Gate()
	},
}

// testServers maps the gate of each test server gated started to the
// server, for the tests that rewrite its log.
var testServers sync.Map // *kurrenttest.Gate -> *kurrenttest.Server

// realServer is the server at KURRENTDB_URL, each test behind a gate of
// its own; the test is skipped when the variable is unset.
func realServer(t *testing.T) target {
	t.Helper()
	raw := os.Getenv(realServerEnv)
	if raw == "" {
		t.Skipf("%s is unset: this ran against the in-process test server only; set it (e.g. esdb://127.0.0.1:2113?tls=false) to run against a real KurrentDB", realServerEnv)
	}
	u, err := url.Parse(raw)
	require.NoError(t, err, "%s is not a single-host connection string", realServerEnv)
	return target{
		name:   "real-server",
		direct: func(*testing.T) string { return raw },
		gated: func(t *testing.T) (string, *kurrenttest.Gate) {
			g, err := kurrenttest.NewGate(u.Host)
			require.NoError(t, err)
			t.Cleanup(g.Close)
			through, err := g.Rewrite(raw)
			require.NoError(t, err)
			return through, g
		},
	}
}

// newNamespace returns a namespace no other test uses.
func newNamespace(t *testing.T) string {
	t.Helper()
	b := make([]byte, 5)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "t" + hex.EncodeToString(b) + "."
}

// openStore opens a store for t on url and closes it when t ends.
func openStore(t *testing.T, cfg kurrent.Config) *kurrent.Store {
	t.Helper()
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = testCallTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = testConnectTimeout
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := kurrent.Open(ctx, cfg)
	require.NoError(t, err, "open %s", cfg.URL)
	t.Cleanup(s.Close)
	return s
}

// everyStream is the StreamPrefixes value of a store owning every stream of
// its namespace.
var everyStream = []string{""}

// onTargets runs f against the test server and, when KURRENTDB_URL is set,
// against a real server too (that subtest is skipped, saying so, when it is
// not).
func onTargets(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	t.Run("test-server", func(t *testing.T) {
		t.Parallel()
		f(t, testServer)
	})
	t.Run("real-server", func(t *testing.T) {
		t.Parallel()
		f(t, realServer(t))
	})
}

// newEvents returns n JSON events with fresh ids.
func newEvents(n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{
			ID: uuid.NewString(), Type: "Tested",
			Data: fmt.Appendf(nil, `{"n":%d}`, i), Metadata: []byte(`{"correlation_id":"COR-1"}`),
		}
	}
	return out
}

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

// mustAppend appends and returns the next expected version.
func mustAppend(t *testing.T, s eventstore.Store, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) int64 {
	t.Helper()
	res, err := s.Append(t.Context(), stream, expected, events)
	require.NoError(t, err, "append %d events to %s at %s", len(events), stream, expected)
	return res.NextExpectedVersion
}

// requireWrongVersion asserts err is a *WrongExpectedVersionError
// reporting actual.
func requireWrongVersion(t *testing.T, err error, expected eventstore.ExpectedVersion, actual int64) {
	t.Helper()
	var wev *eventstore.WrongExpectedVersionError
	require.ErrorAs(t, err, &wev)
	require.Equal(t, expected, wev.Expected, "error's expected version")
	require.Equal(t, actual, wev.Actual, "error's actual version")
}

// rawClient is a client of the library itself, for checking what the server
// holds and does without the store in between. Its calls must have ended
// when the test does (Close with calls in flight panics).
func rawClient(t *testing.T, connection string) *esdb.Client {
	t.Helper()
	cfg, err := esdb.ParseConnectionString(connection)
	require.NoError(t, err)
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
