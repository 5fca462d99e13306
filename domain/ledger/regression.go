package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"opledger/domain"
	"opledger/eventstore"
)

// regressionError is what catchUp returns when the stream no longer holds
// the event the state was folded up to: the store holds less than the
// handler had seen.
type regressionError struct {
	stream      string
	seenVersion int64
	seenID      string
	heldID      string // the event now at seenVersion, if any
	executions  []domain.SeenExecution
}

func newRegressionError(stream string, f *folding, page []eventstore.RecordedEvent) *regressionError {
	e := &regressionError{stream: stream, seenVersion: f.state.Version, seenID: f.lastID, executions: domain.SeenExecutionsOf(f.state)}
	if len(page) > 0 && page[0].Version == f.state.Version {
		e.heldID = page[0].ID
	}
	return e
}

func (e *regressionError) Error() string {
	if e.heldID != "" {
		return fmt.Sprintf("%s went back: version %d holds event %s, not %s as read before", e.stream, e.seenVersion, e.heldID, e.seenID)
	}
	return fmt.Sprintf("%s went back: it no longer holds version %d (event %s), read before", e.stream, e.seenVersion, e.seenID)
}

// afterRegression reports whether err is a regression catchUp found on
// stream; if so it loads the stream as the store holds it now (the
// caller dropped the cached state) and tells Config.Regressions, with the
// version the stream ends at. It returns the fresh load, or the load's
// error (the regression is told either way).
func (h *Handler) afterRegression(ctx context.Context, stream string, err error) (*folding, bool, error) {
	var re *regressionError
	if !errors.As(err, &re) {
		return nil, false, nil
	}
	held := eventstore.NoStreamVersion
	g, lerr := h.load(ctx, stream)
	detail := re.Error()
	if lerr == nil {
		held = g.state.Version
	} else {
		detail += fmt.Sprintf("; reading it again failed: %v", lerr)
	}
	h.cfg.Regressions.ObserveRegression(ctx, eventstore.Regression{
		Cache: h.cfg.CacheName, Stream: stream, SeenVersion: re.seenVersion, SeenEventID: re.seenID,
		HeldVersion: held, HeldEventID: re.heldID, Detail: detail, Context: re.executions,
	})
	return g, true, lerr
}

// logRegressions is the observer of a handler configured without one: it
// logs every regression as an error, so none passes silently.
func logRegressions(log *slog.Logger) eventstore.RegressionObserver {
	return eventstore.RegressionObserverFunc(func(ctx context.Context, r eventstore.Regression) {
		log.ErrorContext(ctx, "LOG REGRESSION: the store holds less than this process had seen (a failover that lost acknowledged writes?); dropped what was cached and read again",
			"cache", r.Cache, "stream", r.Stream, "seen_version", r.SeenVersion, "held_version", r.HeldVersion, "detail", r.Detail)
	})
}
