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

// idEntry is one key and value of an idMap.
type idEntry[V any] struct {
	key idHash
	val V
}

// idMap is a small insertion-ordered map from identifier hashes to values:
// 32 bytes empty, one allocation per growth. The zero value is empty and
// ready to use.
type idMap[V any] struct {
	entries []idEntry[V]
	index   map[idHash]int // built once len(entries) passes smallIndexAt
}

// get returns a pointer to the value of k (valid until the next put), or nil.
func (m *idMap[V]) get(k idHash) *V {
	if m.index != nil {
		if i, ok := m.index[k]; ok {
			return &m.entries[i].val
		}
		return nil
	}
	for i := range m.entries {
		if m.entries[i].key == k {
			return &m.entries[i].val
		}
	}
	return nil
}

// put adds k with v; k must not be present yet. It returns a pointer to the
// stored value (valid until the next put).
func (m *idMap[V]) put(k idHash, v V) *V {
	m.entries = append(m.entries, idEntry[V]{key: k, val: v})
	switch {
	case m.index != nil:
		m.index[k] = len(m.entries) - 1
	case len(m.entries) > smallIndexAt:
		m.index = make(map[idHash]int, 2*len(m.entries))
		for i, e := range m.entries {
			m.index[e.key] = i
		}
	}
	return &m.entries[len(m.entries)-1].val
}

func (m *idMap[V]) len() int { return len(m.entries) }

// idSet is a set of identifier hashes (an idMap of nothing: 8 bytes an entry).
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
