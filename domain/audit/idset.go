package audit

import "hash/maphash"

// smallIndexAt is the size past which an idMap builds a hash index: below
// it a linear scan of a few cache lines beats a map, above it a stream with
// thousands of presentations (a replay storm) stays linear in time.
const smallIndexAt = 16

// idHash is the 64-bit hash of one of an operation's identifiers. Verify
// keeps hashes, not strings, for everything that is no longer open.
type idHash uint64

// hasher hashes identifiers with one seed per Verify run.
type hasher struct{ seed maphash.Seed }

func newHasher() hasher { return hasher{seed: maphash.MakeSeed()} }

func (h hasher) of(s string) idHash {
	if s == "" {
		return 0
	}
	return idHash(maphash.String(h.seed, s))
}

// idMap is a small insertion-ordered map from identifier hashes to values.
// The zero value is empty and ready to use.
type idMap[V any] struct {
	keys  []idHash
	vals  []V
	index map[idHash]int // built once len(keys) passes smallIndexAt
}

// get returns a pointer to the value of k (valid until the next put), or nil.
func (m *idMap[V]) get(k idHash) *V {
	if m.index != nil {
		if i, ok := m.index[k]; ok {
			return &m.vals[i]
		}
		return nil
	}
	for i, x := range m.keys {
		if x == k {
			return &m.vals[i]
		}
	}
	return nil
}

// put adds k with v; k must not be present yet.
func (m *idMap[V]) put(k idHash, v V) *V {
	m.keys = append(m.keys, k)
	m.vals = append(m.vals, v)
	switch {
	case m.index != nil:
		m.index[k] = len(m.keys) - 1
	case len(m.keys) > smallIndexAt:
		m.index = make(map[idHash]int, 2*len(m.keys))
		for i, x := range m.keys {
			m.index[x] = i
		}
	}
	return &m.vals[len(m.vals)-1]
}

func (m *idMap[V]) len() int { return len(m.keys) }

// idSet is a set of identifier hashes.
type idSet struct{ m idMap[struct{}] }

// has reports whether k is in the set.
func (s *idSet) has(k idHash) bool { return s.m.get(k) != nil }

// add puts k in the set and reports whether it was new.
func (s *idSet) add(k idHash) bool {
	if s.has(k) {
		return false
	}
	s.m.put(k, struct{}{})
	return true
}

func (s *idSet) len() int { return s.m.len() }
