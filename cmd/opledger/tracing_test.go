package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// With an OTLP endpoint — the flag, or the standard variable the exporter
// reads itself — spans are exported over OTLP/HTTP to its /v1/traces (and
// flushed at exit); with none, the provider records nothing.
func TestTracesGoOverOTLPWhenConfigured(t *testing.T) {
	got := make(chan *http.Request, 10)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			got <- r
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	log := slog.New(slog.DiscardHandler)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")

	tp, stop, err := startTracing(t.Context(), tracingConfig{service: "opledger-test"}, log)
	require.NoError(t, err)
	_, span := tp.Tracer("t").Start(t.Context(), "nothing")
	require.False(t, span.IsRecording(), "no endpoint: a no-op provider")
	span.End()
	stop()

	for name, c := range map[string]tracingConfig{
		"flag":     {endpoint: collector.URL, fromFlag: true, service: "opledger-test"},
		"variable": {endpoint: collector.URL, service: "opledger-test"},
	} {
		if name == "variable" {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
		}
		tp, stop, err := startTracing(t.Context(), c, log)
		require.NoError(t, err, name)
		_, span := tp.Tracer("t").Start(t.Context(), "a span")
		require.True(t, span.IsRecording(), name)
		span.End()
		stop() // flushes
		select {
		case r := <-got:
			require.Equal(t, http.MethodPost, r.Method, name)
			require.Equal(t, "/v1/traces", r.URL.Path, name)
			require.Equal(t, "application/x-protobuf", r.Header.Get("Content-Type"), name)
		default:
			t.Fatalf("%s: the collector received nothing", name)
		}
	}
}
