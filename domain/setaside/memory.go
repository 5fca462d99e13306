package setaside

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"opledger/domain"
)

// MaxDetailBytes bounds the detail kept per item.
const MaxDetailBytes = domain.MaxTextLength

// MaxMemoryItems bounds how many failing items Memory keeps; beyond it Fail
// returns ErrFull (the loop logs it and goes on: the item is then simply
// retried next round, as before this package existed).
const MaxMemoryItems = 100_000

// ErrFull is returned by Memory.Fail when MaxMemoryItems items are kept.
var ErrFull = errors.New("setaside: too many failing items kept in memory")

// Memory is a Store in process memory, for the in-memory event store, the
// simulator and tests. The zero value is ready to use.
type Memory struct {
	mu    sync.Mutex
	items map[key]Item
}

type key struct {
	role Role
	item string
}

// Fail implements Store.
func (m *Memory) Fail(_ context.Context, f Failure, p Policy) (Item, error) {
	if err := checkFailure(f); err != nil {
		return Item{}, err
	}
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return Item{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items == nil {
		m.items = map[key]Item{}
	}
	k := key{f.Role, f.Item}
	it, seen := m.items[k]
	if !seen {
		if len(m.items) >= MaxMemoryItems {
			return Item{}, ErrFull
		}
		it = Item{Role: f.Role, Item: f.Item, FirstFailedAt: f.At}
	}
	return m.record(k, it, f, p), nil
}

func (m *Memory) record(k key, it Item, f Failure, p Policy) Item {
	it.Attempts++
	it.OperationID = cmp.Or(f.OperationID, it.OperationID)
	it.Reason = f.Reason
	it.Detail, _ = domain.EvidenceText(f.Detail, MaxDetailBytes)
	it.LastFailedAt = f.At
	it.RetryAt = f.At.Add(p.Delay(it.Attempts))
	if !it.SetAside && it.Attempts >= p.MaxAttempts {
		it.SetAside, it.SetAsideAt = true, f.At
	}
	m.items[k] = it
	return it
}

// Clear implements Store.
func (m *Memory) Clear(_ context.Context, role Role, item string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, key{role, item})
	return nil
}

// Held implements Store.
func (m *Memory) Held(_ context.Context, role Role, items []string, now time.Time) (map[string]Item, error) {
	if len(items) > MaxHeldBatch {
		return nil, fmt.Errorf("%w: %d items asked about, at most %d", ErrInvalid, len(items), MaxHeldBatch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Item{}
	for _, id := range items {
		if it, ok := m.items[key{role, id}]; ok && it.Held(now) {
			out[id] = it
		}
	}
	return out, nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, role Role, item string) (Item, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[key{role, item}]
	return it, ok, nil
}

// List implements Store.
func (m *Memory) List(_ context.Context, q Query) ([]Item, error) {
	limit, err := q.limit()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []Item
	for _, it := range m.items {
		if (q.Role == "" || it.Role == q.Role) && (!q.SetAsideOnly || it.SetAside) && (q.After == nil || Compare(it, *q.After) > 0) {
			out = append(out, it)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, Compare)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Counts implements Store.
func (m *Memory) Counts(_ context.Context) ([]Count, error) {
	m.mu.Lock()
	by := map[Role]*Count{}
	for _, it := range m.items {
		c := by[it.Role]
		if c == nil {
			c = &Count{Role: it.Role}
			by[it.Role] = c
		}
		if it.SetAside {
			c.SetAside++
		} else {
			c.Retrying++
		}
	}
	m.mu.Unlock()
	out := make([]Count, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Count) int { return cmp.Compare(a.Role, b.Role) })
	return out, nil
}

// Compare orders items as List does: by FirstFailedAt, then Role, then Item.
func Compare(a, b Item) int {
	return cmp.Or(a.FirstFailedAt.Compare(b.FirstFailedAt), cmp.Compare(a.Role, b.Role), cmp.Compare(a.Item, b.Item))
}

func (q Query) limit() (int, error) {
	switch {
	case q.Limit == 0:
		return DefaultListLimit, nil
	case q.Limit < 0 || q.Limit > MaxListLimit:
		return 0, fmt.Errorf("%w: limit %d outside 1..%d", ErrInvalid, q.Limit, MaxListLimit)
	}
	return q.Limit, nil
}

// CheckFailure validates a failure before it is recorded; backends share it.
func CheckFailure(f Failure) error { return checkFailure(f) }

func checkFailure(f Failure) error {
	switch {
	case f.Role == "":
		return fmt.Errorf("%w: failure without a role", ErrInvalid)
	case f.Item == "" || len(f.Item) > 2*domain.MaxIDLength:
		return fmt.Errorf("%w: item id must be 1..%d bytes", ErrInvalid, 2*domain.MaxIDLength)
	case domain.CheckText("item", f.Item, 2*domain.MaxIDLength, true) != nil:
		return fmt.Errorf("%w: item id %q is not printable text", ErrInvalid, f.Item)
	case f.Reason == "":
		return fmt.Errorf("%w: failure of %s %s without a reason", ErrInvalid, f.Role, f.Item)
	case f.At.IsZero():
		return fmt.Errorf("%w: failure of %s %s without a time", ErrInvalid, f.Role, f.Item)
	}
	return nil
}

// LimitOf returns q's page size (DefaultListLimit for 0), or an error for a
// limit out of range; backends share it.
func LimitOf(q Query) (int, error) { return q.limit() }

var _ Store = (*Memory)(nil)
