package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"opledger/cmd/opledger/internal/settings"
)

// newLogger logs JSON to stderr at the level of the command's
// OPLEDGER_LOG_LEVEL / --log-level (validated when the flags were parsed).
// Durations are written as Go duration text ("1.5s"), never as integer
// nanoseconds, and a key is written once per line however many layers add
// it (the first value wins: the outer layer's, which the inner ones repeat).
func newLogger(stderr io.Writer, f *settings.Flags) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(f.Text(settings.LogLevel)))
	return slog.New(newJSONHandler(stderr, level))
}

func newJSONHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return &uniqueKeys{next: slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}), seen: map[string]bool{}}
}

// durationText writes a duration as its text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	if a.Value.Kind() == slog.KindAny {
		if d, ok := a.Value.Any().(time.Duration); ok {
			return slog.String(a.Key, d.String())
		}
	}
	return a
}

// uniqueKeys drops an attribute whose key this line already has at the top
// level (before any group): a component that adds "worker" to the logger it
// was given, which already carries "worker", would otherwise write the key
// twice, and a JSON object with a key twice is not one every reader reads
// the same way.
type uniqueKeys struct {
	next    slog.Handler
	seen    map[string]bool // keys added by WithAttrs at the top level; never mutated once shared
	grouped bool            // a WithGroup was applied: keys below are the group's own
}

func (h *uniqueKeys) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *uniqueKeys) Handle(ctx context.Context, r slog.Record) error {
	if h.grouped {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	here := map[string]bool{}
	r.Attrs(func(a slog.Attr) bool {
		if !h.seen[a.Key] && !here[a.Key] {
			here[a.Key] = true
			out.AddAttrs(a)
		}
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *uniqueKeys) WithAttrs(attrs []slog.Attr) slog.Handler {
	if h.grouped {
		return &uniqueKeys{next: h.next.WithAttrs(attrs), seen: h.seen, grouped: true}
	}
	seen := make(map[string]bool, len(h.seen)+len(attrs))
	for k := range h.seen {
		seen[k] = true
	}
	kept := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if !seen[a.Key] {
			seen[a.Key] = true
			kept = append(kept, a)
		}
	}
	return &uniqueKeys{next: h.next.WithAttrs(kept), seen: seen}
}

func (h *uniqueKeys) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &uniqueKeys{next: h.next.WithGroup(name), seen: h.seen, grouped: true}
}

// newQuietLogger logs nothing a person would read: for commands whose own
// output tells the story.
func newQuietLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))
}
