package audit

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// DigestCheck is what Verify found comparing the log with one digest.
type DigestCheck struct {
	// Role is "digest" (--digest) or "previous" (--previous).
	Role     string `json:"role"`
	TreeSize uint64 `json:"tree_size"`
	Root     string `json:"root"`
	Position string `json:"position"`
	Time     string `json:"time"`
	KeyID    string `json:"key_id"`
	// Matches is true when the log's first TreeSize events are exactly the
	// ones the digest covers: unchanged, none removed, inserted or
	// reordered.
	Matches bool `json:"matches"`
	// Departure says where the log first departs from the digest, when it
	// does.
	Departure *Departure `json:"departure,omitempty"`
	// Extends is set on the previous digest: true when the later digest is
	// proved to extend it (a consistency proof from the log verified
	// against both roots), false when the log matches the later digest and
	// not this one (history was rewritten before the later one was signed);
	// absent when the log matches neither and so cannot tell.
	Extends *bool `json:"extends,omitempty"`
	// ConsistencyProof is that proof (hex), when it verified: with the two
	// digests it lets anyone check the extension without the log.
	ConsistencyProof []string `json:"consistency_proof,omitempty"`
}

// Departure locates the first place where the log departs from a digest:
// exactly (one event), or within a window of events when the forgery
// rewrote the stored hashes too (the digest then proves that something in
// the window changed, not what).
type Departure struct {
	Exact bool `json:"exact"`
	// FromIndex..ToIndex are 0-based indexes into the log (the events'
	// order), equal when Exact; the positions are the events' there (""
	// for an index past the log's end).
	FromIndex    uint64 `json:"from_index"`
	ToIndex      uint64 `json:"to_index"`
	FromPosition string `json:"from_position"`
	ToPosition   string `json:"to_position"`
	// Stream and Version name the event when Exact and it exists.
	Stream  string `json:"stream,omitempty"`
	Version int64  `json:"version,omitempty"`
	Message string `json:"message"`
}

// mark is one event's place in the log.
type mark struct {
	index    uint64
	position string
	stream   string
	version  int64
	set      bool
}

func markOf(i uint64, rec *eventstore.RecordedEvent) mark {
	return mark{index: i, position: rec.Position.String(), stream: rec.StreamID, version: rec.Version, set: true}
}

// segment is one unit of a digest a log is compared with: a block, or a
// subtree of the tail.
type segment struct {
	begin, end uint64
	want       []byte
}

// digestChecker compares the log, event by event, with one digest: the
// recomputed leaves (what the events are) and the stored ones (what their
// stored hashes say they were) of each segment against the digest's.
type digestChecker struct {
	d        *Digest
	role     string
	segments []segment
	seg      int // current segment
	rangeL   *compact.Range
	rangeS   *compact.Range
	n        uint64 // events seen
	begin    mark   // first event of the current segment
	mismatch mark   // first event in the segment whose stored hash is not its content's
	suspect  mark   // first event in the segment showing a chain break
	failed   bool
	result   DigestCheck
}

func newDigestChecker(d *Digest, role string) *digestChecker {
	c := &digestChecker{d: d, role: role, result: DigestCheck{Role: role, TreeSize: d.TreeSize, Root: d.Root,
		Position: d.Position, Time: d.Time, KeyID: d.KeyID}}
	size := uint64(1) << d.BlockLevel
	for j, b := range d.blocks {
		c.segments = append(c.segments, segment{begin: uint64(j) * size, end: uint64(j+1) * size, want: b})
	}
	full := uint64(len(d.blocks)) * size
	for k, id := range compact.RangeNodes(full, d.TreeSize, nil) {
		b, e := id.Coverage()
		c.segments = append(c.segments, segment{begin: b, end: e, want: d.tail[k]})
	}
	c.startSegment(0)
	return c
}

func (c *digestChecker) startSegment(at uint64) {
	c.rangeL, c.rangeS = ranges.NewEmptyRange(at), ranges.NewEmptyRange(at)
	c.begin, c.mismatch, c.suspect = mark{}, mark{}, mark{}
}

// done reports whether every event the digest covers was seen.
func (c *digestChecker) done() bool { return c.n >= c.d.TreeSize }

// add compares the next event of the log: recomputed is its chain hash
// from its content, stored its stored hash (recomputed when it has none),
// suspect whether the chain checks found it broken.
func (c *digestChecker) add(rec *eventstore.RecordedEvent, recomputed, stored chain.Hash, suspect bool) {
	if c.done() {
		return
	}
	i := c.n
	c.n++
	if c.failed {
		return
	}
	m := markOf(i, rec)
	if !c.begin.set {
		c.begin = m
	}
	if recomputed != stored && !c.mismatch.set {
		c.mismatch = m
	}
	if (suspect || recomputed != stored) && !c.suspect.set {
		c.suspect = m
	}
	must(c.rangeL.Append(leafHash(recomputed), nil))
	must(c.rangeS.Append(leafHash(stored), nil))
	s := c.segments[c.seg]
	if c.n < s.end {
		return
	}
	if !bytes.Equal(c.rangeL.Hashes()[0], s.want) {
		c.depart(s, bytes.Equal(c.rangeS.Hashes()[0], s.want), m)
		return
	}
	c.seg++
	c.startSegment(c.n)
}

// depart records the first departure, in segment s whose last event is
// last; storedMatches says the stored hashes there are the digest's.
func (c *digestChecker) depart(s segment, storedMatches bool, last mark) {
	c.failed = true
	dep := &Departure{FromIndex: s.begin, FromPosition: c.begin.position, ToIndex: last.index, ToPosition: last.position}
	switch {
	case storedMatches && c.mismatch.set:
		m := c.mismatch
		*dep = Departure{Exact: true, FromIndex: m.index, ToIndex: m.index, FromPosition: m.position, ToPosition: m.position,
			Stream: m.stream, Version: m.version,
			Message: fmt.Sprintf("event %d (position %s, %s version %d) is not the event the digest covers: its content or its place in its stream was changed after it was written (its stored hash is still the digest's)", m.index, m.position, m.stream, m.version)}
	case c.suspect.set:
		dep.ToIndex, dep.ToPosition = c.suspect.index, c.suspect.position
		dep.Message = fmt.Sprintf("the log departs from the digest within events %d..%d (positions %s .. %s): the first event there that shows a break is at position %s (%s version %d); events were changed, removed, inserted or reordered",
			dep.FromIndex, dep.ToIndex, dep.FromPosition, dep.ToPosition, c.suspect.position, c.suspect.stream, c.suspect.version)
	default:
		dep.Message = fmt.Sprintf("the log departs from the digest within events %d..%d (positions %s .. %s), though every hash there is consistent: events were changed, removed, inserted or reordered and their hashes rewritten; the digest proves something there changed, not what",
			dep.FromIndex, dep.ToIndex, dep.FromPosition, dep.ToPosition)
	}
	c.result.Departure = dep
}

// finish ends the comparison after the last event of the range.
func (c *digestChecker) finish() DigestCheck {
	switch {
	case c.failed:
	case c.n < c.d.TreeSize:
		// The log ends before the digest does: blocks before the current
		// segment matched; the departure lies between its start and the
		// first missing event.
		dep := &Departure{FromIndex: c.segments[c.seg].begin, ToIndex: c.n, FromPosition: c.begin.position}
		if c.segments[c.seg].begin == c.n {
			dep.Exact = true
			dep.Message = fmt.Sprintf("the log holds %d events, the digest covers %d: every event up to %d is the digest's, and the events from index %d on were removed", c.n, c.d.TreeSize, c.n, c.n)
		} else {
			dep.Message = fmt.Sprintf("the log holds %d events, the digest covers %d: events were removed within events %d..%d (from position %s)", c.n, c.d.TreeSize, dep.FromIndex, c.n, dep.FromPosition)
		}
		c.result.Departure = dep
		c.failed = true
	default:
		c.result.Matches = true
	}
	return c.result
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("audit: merkle: %v", err))
	}
}

// consistency proves, from the log's tree, that the digest of size n2
// extends the one of size n1 (n1 <= n2).
type consistency struct {
	n1, n2 uint64
	nodes  proof.Nodes
	tree   *logTree
}

func newConsistency(n1, n2 uint64) (*consistency, error) {
	nodes, err := proof.Consistency(n1, n2)
	if err != nil {
		return nil, err
	}
	c := &consistency{n1: n1, n2: n2, nodes: nodes, tree: newLogTree()}
	for _, id := range nodes.IDs {
		c.tree.want[id] = nil
	}
	return c, nil
}

func (c *consistency) add(recomputed chain.Hash) {
	if c.tree.size() < c.n2 {
		c.tree.append(recomputed)
	}
}

// prove returns the proof, verified against both roots, or an error.
func (c *consistency) prove(root1, root2 []byte) ([]string, error) {
	if c.tree.size() < c.n2 {
		return nil, fmt.Errorf("the log holds %d events, fewer than %d", c.tree.size(), c.n2)
	}
	hashes := make([][]byte, len(c.nodes.IDs))
	for i, id := range c.nodes.IDs {
		if hashes[i] = c.tree.want[id]; hashes[i] == nil {
			return nil, fmt.Errorf("bug: node %v of the consistency proof was not computed", id)
		}
	}
	p, err := c.nodes.Rehash(hashes, treeHasher.HashChildren)
	if err != nil {
		return nil, err
	}
	if err := proof.VerifyConsistency(treeHasher, c.n1, c.n2, p, root1, root2); err != nil {
		return nil, err
	}
	out := make([]string, len(p))
	for i, h := range p {
		out[i] = hex.EncodeToString(h)
	}
	return out, nil
}
