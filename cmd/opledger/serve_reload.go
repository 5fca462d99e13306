package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
)

// reloadable is what SIGHUP reads again: the token file, the signing keys,
// the TLS certificate. Each is swapped atomically; one that fails to load
// keeps the version in use and is logged and counted
// (opledger_reloads_total{result="error"}).
type reloadable struct {
	tokens  *httpapi.Tokens
	keys    *captoken.Keys
	keysSrc string // "" for --dev's ephemeral key: nothing to reload
	cert    *httpapi.Certificate
	metrics *httpapi.Metrics
	log     *slog.Logger
}

// reloadAll reloads each file once.
func (r *reloadable) reloadAll() {
	err := r.tokens.Reload()
	r.report("tokens", r.tokens.Source(), err)
	if err == nil {
		warnPlainTokens(r.log, r.tokens)
	}
	if r.keysSrc != "" {
		err := r.keys.Reload()
		r.report("signing_keys", r.keysSrc, err)
		if err == nil {
			r.log.Info("signing keys", "active", r.keys.KeyID(), "keys", keyStates(r.keys.Status()))
		}
	}
	if r.cert != nil {
		err := r.cert.Reload()
		r.report("tls", "", err)
		if err == nil {
			r.log.Info("TLS certificate", "subject", r.cert.Leaf().Subject.String(), "not_after", r.cert.Leaf().NotAfter)
		}
	}
}

func (r *reloadable) report(file, path string, err error) {
	r.metrics.ObserveReload(file, err)
	if err != nil {
		r.log.Error("reload failed; the previous "+file+" stay in use", "file", file, "err", err)
		return
	}
	r.log.Info("reloaded "+file, "file", file, "path", path)
}

// notifyHangup starts catching SIGHUP (whose default would end the
// process); call it first thing. Signals that arrive during a reload are
// coalesced into one more (the channel holds one).
func notifyHangup() (<-chan os.Signal, func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
}

// onHangup reloads on every signal of hup until ctx ends.
func (r *reloadable) onHangup(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reloadAll()
		}
	}
}

// warnPlainTokens says which lines of the token file hold plain tokens.
func warnPlainTokens(log *slog.Logger, t *httpapi.Tokens) {
	if lines := t.PlainLines(); len(lines) > 0 {
		log.Warn("the token file holds plain tokens; replace each with its digest ('opledger tokens hash')",
			"file", t.Source(), "lines", lines)
	}
}

// keyStates summarises a ring for the log: id=state pairs.
func keyStates(st []captoken.KeyStatus) []string {
	out := make([]string, len(st))
	for i, k := range st {
		out[i] = k.ID + "=" + string(k.State)
	}
	return out
}
