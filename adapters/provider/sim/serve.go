package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds how long Serve waits for in-flight requests once its
// context ends; after it, connections are closed.
const shutdownGrace = 5 * time.Second

// Serve serves the simulator on ln until ctx ends, then closes the simulator
// (held responses are answered, delayed requests get a 503 without executing)
// and shuts the server down, giving requests in flight shutdownGrace before
// their connections are cut. It returns nil after a shutdown caused by ctx,
// or the server's error.
func (s *Simulator) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("provider simulator: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.Close()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("provider simulator: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// ListenAndServe builds a simulator from cfg, listens on addr (for example
// "127.0.0.1:8089") and serves it until ctx ends (see Serve).
func ListenAndServe(ctx context.Context, addr string, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("provider simulator: listen %s: %w", addr, err)
	}
	s.log.Info("provider simulator listening", "addr", ln.Addr().String())
	return s.Serve(ctx, ln)
}
