package httpapi

import (
	"log/slog"
	"net/http"
	"time"
)

// Timeouts of the http.Server NewHTTPServer returns. Every request of this
// API is small and every command bounded by Config.CommandTimeout, so a
// connection that is slower than these is stuck or hostile.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
)

// NewHTTPServer returns an http.Server serving h on addr with the timeouts
// above, its own errors logged through logger. Stop it with Shutdown, which
// lets requests in flight finish.
func NewHTTPServer(addr string, h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.Default()
	}
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
