package domain

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// EvidenceLogState is an EvidenceLog's content in a form to encode: what a
// snapshot of an evidence stream's fold keeps. It holds every count the
// bound decides on and nothing else, so a log restored from it
// (EvidenceLogFromState) admits exactly as the log it was taken of.
type EvidenceLogState struct {
	Stream  string                `json:"stream"`
	Version int64                 `json:"version"`
	Bound   EvidenceBound         `json:"bound"`
	Windows []EvidenceWindowState `json:"windows"` // oldest first
}

// EvidenceWindowState is one window's counts of an EvidenceLogState.
type EvidenceWindowState struct {
	Start  time.Time          `json:"start"`
	Total  int                `json:"total"`
	PerKey []EvidenceKeyCount `json:"per_key"` // by scope, then id
}

// EvidenceKeyCount is how many refusals of one key a window recorded one
// by one.
type EvidenceKeyCount struct {
	Scope EvidenceScope `json:"scope"`
	ID    string        `json:"id,omitempty"`
	Count int           `json:"count"`
}

// State returns l's content; it shares nothing with l, and the same log
// always gives the same state (keys in order).
func (l *EvidenceLog) State() EvidenceLogState {
	s := EvidenceLogState{Stream: l.Stream, Version: l.Version, Bound: l.bound, Windows: make([]EvidenceWindowState, len(l.windows))}
	for i, w := range l.windows {
		ws := EvidenceWindowState{Start: w.start, Total: w.total, PerKey: make([]EvidenceKeyCount, 0, len(w.perKey))}
		for k, n := range w.perKey {
			ws.PerKey = append(ws.PerKey, EvidenceKeyCount{Scope: k.Scope, ID: k.ID, Count: n})
		}
		slices.SortFunc(ws.PerKey, func(a, b EvidenceKeyCount) int {
			return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.ID, b.ID))
		})
		s.Windows[i] = ws
	}
	return s
}

// EvidenceLogFromState restores the log s is the state of. It refuses a
// state no fold under s.Bound can reach: a bound that cannot be kept, more
// windows than a log keeps, windows not ascending or not starting at a
// window of the bound, a key of no known scope or named twice, a count
// below one, or a window whose total is not the sum of its keys' counts.
// The counts may exceed the bound: a log counts what its stream holds,
// and handlers whose clocks differ can record past it.
func EvidenceLogFromState(s EvidenceLogState) (*EvidenceLog, error) {
	if err := s.Bound.Check(); err != nil {
		return nil, fmt.Errorf("evidence log state of %s: %w", s.Stream, err)
	}
	if s.Version < -1 || len(s.Windows) > evidenceWindows {
		return nil, fmt.Errorf("evidence log state of %s: version %d, %d windows (at most %d)", s.Stream, s.Version, len(s.Windows), evidenceWindows)
	}
	l := NewEvidenceLog(s.Stream, s.Bound)
	l.Version = s.Version
	for i, ws := range s.Windows {
		start := ws.Start.UTC()
		if !start.Equal(s.Bound.WindowOf(start)) || (i > 0 && !start.After(s.Windows[i-1].Start)) {
			return nil, fmt.Errorf("evidence log state of %s: window %d starts at %s: not a window of %s after the one before", s.Stream, i, ws.Start, s.Bound.Window)
		}
		w := evidenceWindow{start: start, total: ws.Total, perKey: make(map[EvidenceKey]int, len(ws.PerKey))}
		sum := 0
		for _, kc := range ws.PerKey {
			k := EvidenceKey{Scope: kc.Scope, ID: kc.ID}
			if _, twice := w.perKey[k]; twice || !kc.Scope.Valid() || kc.Count < 1 {
				return nil, fmt.Errorf("evidence log state of %s: window %s: key %s counted %d", s.Stream, start, k, kc.Count)
			}
			w.perKey[k] = kc.Count
			sum += kc.Count
		}
		if sum != ws.Total {
			return nil, fmt.Errorf("evidence log state of %s: window %s: total %d, its keys count %d", s.Stream, start, ws.Total, sum)
		}
		l.windows = append(l.windows, w)
	}
	return l, nil
}
