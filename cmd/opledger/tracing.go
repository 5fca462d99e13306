package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"opledger/adapters/httpapi"
	"opledger/cmd/opledger/internal/settings"
)

// Traces leave the process over OTLP/HTTP when an endpoint is configured
// (--otlp-endpoint, or the standard OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with the other OTEL_* variables the
// exporter and the SDK read: headers, timeout, sampler, resource); with
// none, the tracer provider is a no-op and nothing is recorded.

// tracingConfig is a command's trace export settings.
type tracingConfig struct {
	endpoint string // the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT holds it
	fromFlag bool
	service  string // service.name unless OTEL_SERVICE_NAME says otherwise
}

func tracingFrom(f *settings.Flags, service string) tracingConfig {
	return tracingConfig{endpoint: f.Text(settings.OTLPEndpoint), fromFlag: f.Source(settings.OTLPEndpoint) == settings.FromFlag, service: service}
}

func (c tracingConfig) enabled() bool {
	return c.endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// traceShutdownTimeout bounds flushing the spans still queued at exit.
const traceShutdownTimeout = 5 * time.Second

// startTracing returns the tracer provider the command's roles use and
// what flushes and stops it.
func startTracing(ctx context.Context, c tracingConfig, log *slog.Logger) (trace.TracerProvider, func(), error) {
	if !c.enabled() {
		return noop.NewTracerProvider(), func() {}, nil
	}
	var opts []otlptracehttp.Option
	if c.fromFlag { // the variable the exporter reads itself
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(c.endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...) // no I/O until spans are exported
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", c.service), attribute.String("service.version", httpapi.Build().Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		log.Warn("trace resource: some attributes could not be read", "err", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces: export failed", "err", err) }))
	log.Info("traces exported over OTLP/HTTP", "service", c.service, "endpoint", cutQuery(c.endpoint))
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("traces: flushing at exit failed", "err", err)
		}
	}, nil
}

// cutQuery drops a URL's query, which might carry a credential.
func cutQuery(u string) string {
	u, _, _ = strings.Cut(u, "?")
	return u
}
