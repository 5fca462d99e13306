package httpapi

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// requestInfo is what the endpoint learns about a request that the log line
// and the metrics want: who sent it and how it failed.
type requestInfo struct {
	id  string
	who Principal
	// token is the digest of the caller's bearer token, once authenticated:
	// what per-token bounds count by (never logged).
	token [sha256.Size]byte
	err   *apiError
}

type requestInfoKey struct{}

func requestInfoFrom(ctx context.Context) *requestInfo {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return info
	}
	return &requestInfo{}
}

// statusRecorder remembers the status and size of an answer.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequest logs one request and counts it. The token is never logged:
// only the role and the actor name it maps to.
func (s *Server) logRequest(r *http.Request, rec *statusRecorder, info *requestInfo, route string, took time.Duration) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelInfo
	if info.err != nil && info.err.status >= 500 {
		level = slog.LevelError
	}
	defer s.cfg.Metrics.observeRequest(route, strconv.Itoa(status), took)
	if !s.cfg.Logger.Enabled(r.Context(), level) {
		return // a line nobody keeps is not built
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", took),
		slog.String("request_id", info.id),
	}
	if info.who.Role != "" {
		attrs = append(attrs, slog.String("role", string(info.who.Role)), slog.String("actor", info.who.Name))
	}
	if info.err != nil {
		attrs = append(attrs, slog.String("code", info.err.code))
		if info.err.status >= 500 && info.err.cause != nil {
			attrs = append(attrs, slog.String("err", info.err.cause.Error()))
		}
	}
	s.cfg.Logger.LogAttrs(r.Context(), level, "http request", attrs...)
}
