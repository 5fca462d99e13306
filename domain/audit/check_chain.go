package audit

import (
	"context"
	"fmt"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// The hash-chain checks, made on every event of the range and on the
// stores' stream heads. They need no digest: they catch a change that did
// not recompute the hashes (an UPDATE of a field, a deleted or inserted
// event, two events swapped) but not a consistent rewrite with fresh
// hashes, which only a digest catches.
var (
	// H1: every event's stored hash is the one recomputed from its stored
	// content, and it links to the hash of the event before it in its
	// stream (Genesis for the first).
	H1ChainIntact = Invariant{"H1", "hash-chain-intact"}
	// H2: every event carries a hash; events stored before hashing began
	// are not tamper-evident without a digest (reported once per stream,
	// and not a violation with VerifyOptions.AllowUnhashed).
	H2EventsHashed = Invariant{"H2", "events-hashed"}
	// H3: the head a store records apart from the log (PostgreSQL's streams
	// table) is the stream's last event: its version and hash.
	H3HeadsMatch = Invariant{"H3", "stream-heads-match"}
	// D1: the log's first events are the ones a signed digest covers.
	D1MatchesDigest = Invariant{"D1", "log-matches-digest"}
	// D2: a later digest extends an earlier one (a consistency proof).
	D2DigestsConsistent = Invariant{"D2", "digests-consistent"}
)

// ChainSummary is what the chain checks saw.
type ChainSummary struct {
	// Hashed and Unhashed count the events of the range with and without a
	// hash; UnhashedStreams the streams with an unhashed prefix.
	Hashed          int64 `json:"hashed"`
	Unhashed        int64 `json:"unhashed"`
	UnhashedStreams int64 `json:"unhashed_streams"`
	// Streams is how many streams the range touched.
	Streams int64 `json:"streams"`
	// HeadsChecked reports whether the store's stream heads were compared
	// with the log (only stores with a HeadReader, only for a range from
	// the start of the log).
	HeadsChecked bool `json:"heads_checked"`
}

// chainState is one stream's chain as the check has followed it: 40 bytes.
type chainState struct {
	version  int64      // last version seen (-1: none)
	link     chain.Hash // what the next event must link to
	began    bool       // an event with a hash was seen
	unhashed bool       // an event without one was seen before any with
	headSeen bool       // the store's head for it was compared
}

// chainChecker follows every stream's chain through one Verify run.
type chainChecker struct {
	v       *verifier
	streams map[string]*chainState
}

func newChainChecker(v *verifier) *chainChecker {
	return &chainChecker{v: v, streams: map[string]*chainState{}}
}

// check checks one event of the range. suspect reports whether the event
// itself shows a break (the digest check uses it to narrow a departure).
func (c *chainChecker) check(ctx context.Context, rec *eventstore.RecordedEvent, d decodedEvent) (suspect bool, err error) {
	slot := c.slotOf(rec)
	var st *chainState
	if slot != nil {
		st = *slot
	}
	if st == nil {
		st = c.streams[rec.StreamID]
	}
	if st == nil {
		if len(c.streams) >= c.v.opts.MaxOperations {
			return false, fmt.Errorf("verify: %w: more than %d streams (MaxOperations) at %s: verify a narrower range", ErrLimitExceeded, c.v.opts.MaxOperations, rec.Position)
		}
		st = &chainState{version: eventstore.NoStreamVersion, link: chain.Genesis}
		c.streams[rec.StreamID] = st
		c.v.report.Chain.Streams++
		if c.v.opts.From != nil && rec.Version > 0 {
			if err := c.prime(ctx, rec.StreamID, rec.Version-1, st); err != nil {
				return false, err
			}
		}
	}
	if slot != nil {
		*slot = st
	}
	defer func() { st.version = max(st.version, rec.Version) }()
	emit := func(inv Invariant, format string, args ...any) {
		c.v.emitFor(rec, inv, fmt.Sprintf(format, args...))
	}
	if d.linkErr != nil {
		emit(H1ChainIntact, "its hash cannot be recomputed from what is stored: %v", d.linkErr)
		st.link = chain.Genesis
		return true, nil
	}
	r := d.link
	if !r.Hashed {
		c.v.report.Chain.Unhashed++
		st.link = chain.Genesis
		switch {
		case st.began:
			emit(H1ChainIntact, "carries no hash, though an earlier event of its stream does: its hash was removed")
			return true, nil
		case !st.unhashed:
			st.unhashed = true
			c.v.report.Chain.UnhashedStreams++
			if !c.v.opts.AllowUnhashed {
				emit(H2EventsHashed, "stored before hashing began: this event and the unhashed ones after it in its stream are not tamper-evident without a digest")
			}
		}
		return false, nil
	}
	c.v.report.Chain.Hashed++
	if r.Stored != r.Hash {
		emit(H1ChainIntact, "its stored hash %s is not the hash of its content %s: it was changed after it was written", short(r.Stored), short(r.Hash))
		suspect = true
	}
	switch {
	case rec.Version != st.version+1:
		emit(H1ChainIntact, "follows version %d of its stream: its chain link cannot be checked (an event was removed, inserted or moved)", st.version)
		suspect = true
	case r.Prev != st.link:
		what := "the hash of version " + itoa(st.version)
		if st.version < 0 {
			what = "the genesis value"
		} else if st.link == chain.Genesis {
			what = "the genesis value (version " + itoa(st.version) + " carries no hash)"
		}
		emit(H1ChainIntact, "links to %s, not to %s %s: an event before it was removed, inserted or changed", short(r.Prev), what, short(st.link))
		suspect = true
	}
	st.began, st.link = true, r.Stored
	return suspect, nil
}

// slotOf returns where the operation state the verifier just checked rec
// through keeps rec's stream's chain state, or nil when rec is not the
// event the verifier checked last or is of no operation.
func (c *chainChecker) slotOf(rec *eventstore.RecordedEvent) **chainState {
	v := c.v
	if v.checked != rec || v.checkedOp == nil {
		return nil
	}
	if v.checkedEvidence {
		return &v.checkedOp.chains[1]
	}
	return &v.checkedOp.chains[0]
}

// prime sets a stream first met after From from its event at version
// before (the one the first event in range links to), as stored.
func (c *chainChecker) prime(ctx context.Context, stream string, before int64, st *chainState) error {
	page, err := c.v.store.ReadStream(ctx, stream, before, 1)
	if err != nil {
		return fmt.Errorf("verify: read the event before the range of %s: %w", stream, err)
	}
	if len(page) == 1 && page[0].Version == before {
		st.version = before
		if h, ok, err := chain.FromBytes(page[0].Hash); ok && err == nil {
			st.link, st.began = h, true
		}
	}
	return nil
}

// headPage bounds the heads read at once.
const headPage = 1000

// checkHeads compares the store's stream heads with the chains followed,
// when the store records heads and the range starts at the log's start.
// A head ahead of the log is checked against the stream itself: events
// appended since the log was read are not a finding.
func (c *chainChecker) checkHeads(ctx context.Context) error {
	hr, ok := c.v.store.(eventstore.HeadReader)
	if !ok || c.v.opts.From != nil {
		return nil
	}
	c.v.report.Chain.HeadsChecked = true
	after := ""
	// Bounded: one page per headPage streams, and there are at most
	// MaxOperations streams followed plus those appended since.
	for range c.v.opts.MaxOperations/headPage + 1_000 {
		heads, err := hr.ReadHeads(ctx, after, headPage)
		if err != nil {
			return fmt.Errorf("verify: read stream heads: %w", err)
		}
		for _, h := range heads {
			if err := c.checkHead(ctx, h); err != nil {
				return err
			}
		}
		if len(heads) < headPage {
			for stream, st := range c.streams {
				if !st.headSeen {
					c.v.emitHead(stream, st.version, "the log holds events of this stream up to version %d, but the store records no head for it", st.version)
				}
			}
			return nil
		}
		after = heads[len(heads)-1].StreamID
	}
	return fmt.Errorf("verify: %w: more stream heads than streams in the log allow", ErrLimitExceeded)
}

func (c *chainChecker) checkHead(ctx context.Context, h eventstore.StreamHead) error {
	st := c.streams[h.StreamID]
	if st != nil {
		st.headSeen = true
	}
	last := eventstore.NoStreamVersion
	if st != nil {
		last = st.version
	}
	if h.Version > last {
		// Appended after the log was read, or removed from the log?
		page, err := c.v.store.ReadStream(ctx, h.StreamID, last+1, 1)
		if err != nil {
			return fmt.Errorf("verify: read %s after version %d: %w", h.StreamID, last, err)
		}
		if len(page) == 0 {
			c.v.emitHead(h.StreamID, h.Version, "the store records version %d as its head, but the log ends at version %d: events were removed from its end", h.Version, last)
		}
		return nil
	}
	if h.Version < last {
		c.v.emitHead(h.StreamID, h.Version, "the store records version %d as its head, but the log holds version %d: events were added past the head, or the head was moved back", h.Version, last)
		return nil
	}
	if stored, ok, err := chain.FromBytes(h.Hash); err != nil {
		c.v.emitHead(h.StreamID, h.Version, "the store's head hash is malformed: %v", err)
	} else if ok && st.began && stored != st.link {
		c.v.emitHead(h.StreamID, h.Version, "the store's head hash %s is not the hash %s of the stream's last event", short(stored), short(st.link))
	}
	return nil
}

func short(h chain.Hash) string { return h.String()[:16] }
