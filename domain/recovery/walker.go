package recovery

import (
	"context"
	"fmt"
)

// maxPagesPerRound bounds the index queries of one round: held candidates
// (backing off, or set aside) are skipped without counting against the
// batch, and a long run of them must not make one round read the whole
// index. The cursor carries the walk on at the next round.
const maxPagesPerRound = 10

// walker walks an index's order across rounds with a keyset cursor: each
// round starts where the last one stopped, and the walk wraps to the start
// when a page comes back short. So candidates that keep failing at the old
// end of the order cannot keep newer ones from being reached. Not safe for
// concurrent use (a role runs one round at a time).
type walker struct {
	cursor Cursor
	batch  int
}

// candidate is a candidate to handle this round and the cursor just before
// it, where the walk resumes if the round stops at it.
type candidate struct {
	ref  ExecutionRef
	prev Cursor
}

// fetch is an index query: candidates after a cursor, at most limit.
type fetch func(ctx context.Context, after Cursor, limit int) ([]ExecutionRef, error)

// next returns up to batch candidates that s does not hold, in the index's
// order from the cursor, reading at most maxPagesPerRound pages; and where
// the walk stands after them (the start when it reached the end). It does
// not move the walker: commit does, once the round knows how far it got.
func (w *walker) next(ctx context.Context, s *items, query fetch) ([]candidate, Cursor, error) {
	var out []candidate
	at := w.cursor
	for page := 0; page < maxPagesPerRound && len(out) < w.batch; page++ {
		refs, err := query(ctx, at, w.batch)
		if err != nil {
			return nil, w.cursor, err
		}
		ids := make([]string, len(refs))
		for i, r := range refs {
			ids[i] = string(r.ExecutionID)
		}
		held, err := s.store.Held(ctx, s.role, ids, s.clock.Now())
		if err != nil {
			return nil, w.cursor, fmt.Errorf("%s: held items: %w", s.role, err)
		}
		examined := 0
		for _, r := range refs {
			if len(out) == w.batch {
				break
			}
			examined++
			if _, isHeld := held[string(r.ExecutionID)]; !isHeld {
				out = append(out, candidate{ref: r, prev: at})
			}
			at = CursorOf(r)
		}
		if examined == len(refs) && len(refs) < w.batch {
			return out, Cursor{}, nil // the end: the next round starts over
		}
	}
	return out, at, nil
}

// commit moves the walk: to end when the round handled every candidate,
// else back to just before the first candidate it did not get to.
func (w *walker) commit(cands []candidate, handled int, end Cursor) {
	if handled < len(cands) {
		w.cursor = cands[handled].prev
		return
	}
	w.cursor = end
}
