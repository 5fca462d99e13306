package audit

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"opledger/eventstore"
)

// ErrChainBroken is wrapped by Digester.Sign when an event read carries a
// hash its content does not match: a digest would vouch for a changed log,
// so none is made until the break is explained (run Verify).
var ErrChainBroken = errors.New("audit: the log's hash chain is broken")

// digesterPage is how many events one read takes.
const digesterPage = 1000

// Digester builds the Merkle tree of the global log as it grows and signs
// digests of it. It holds O(log n) hashes and at most maxBlocks block
// roots, whatever the log's size, so serve can keep one for as long as it
// runs and sign a digest on a schedule; the first catch-up reads the whole
// log once. Not safe for concurrent use.
type Digester struct {
	store eventstore.Store
	tree  *logTree
	last  eventstore.Position
	// lastEvent names the last event the tree holds (its stream, version
	// and id), so that the store can be asked whether it still holds it.
	lastEvent eventRef
	// watch, when positive, is a tree size whose root is kept in watched
	// as the tree passes it (RootAt).
	watch   uint64
	watched []byte
	// breaks counts events whose stored hash does not match their content;
	// firstBreak describes the first.
	breaks     int64
	firstBreak string
}

// NewDigester returns a digester at the start of store's log.
func NewDigester(store eventstore.Store) *Digester {
	return &Digester{store: store, tree: newLogTree()}
}

// Size is the number of events the tree holds.
func (d *Digester) Size() uint64 { return d.tree.size() }

// Last is the position of the last event the tree holds (nil: none).
func (d *Digester) Last() eventstore.Position { return d.last }

// CatchUp reads the log after what the tree holds, up to and including to
// (nil: as far as ReadAll reaches now), at most maxEvents events (a log
// growing faster than it is read still ends the call), and adds them. It
// returns how many it added.
func (d *Digester) CatchUp(ctx context.Context, to eventstore.Position, maxEvents int64) (int64, error) {
	if to != nil && d.last != nil && d.last.Compare(to) >= 0 {
		return 0, nil
	}
	pages, stop := readAhead(ctx, d.store, d.last, to, digesterPage, maxEvents, linkOnly)
	defer stop()
	var added int64
	for p := range pages {
		if p.err != nil {
			return added, p.err
		}
		for i := range p.events {
			rec := &p.events[i]
			if to != nil && rec.Position.Compare(to) > 0 {
				return added, nil
			}
			d.add(rec, p.decoded[i])
			added++
		}
	}
	if err := ctx.Err(); err != nil {
		return added, fmt.Errorf("digest: %w", err)
	}
	return added, nil
}

func (d *Digester) add(rec *eventstore.RecordedEvent, prep decodedEvent) {
	d.last = rec.Position
	d.lastEvent = eventRef{stream: rec.StreamID, version: rec.Version, id: rec.ID}
	switch {
	case prep.linkErr != nil:
		d.broken(rec, fmt.Sprintf("its hash cannot be recomputed: %v", prep.linkErr))
	case prep.link.Hashed && !prep.link.Matches():
		d.broken(rec, "its stored hash does not match its content")
	}
	// A broken event still takes its place in the tree (as its content
	// hashes now), so positions after it keep their indexes.
	d.tree.append(prep.link.Hash)
	if d.watch > 0 && d.tree.size() == d.watch {
		d.watched = d.tree.root()
	}
}

// eventRef names one event of the log.
type eventRef struct {
	stream  string
	version int64
	id      string
}

// Watch asks the digester to keep the root of its tree as the tree passes
// size n (RootAt): what a digest signed before of n events must match.
func (d *Digester) Watch(n uint64) {
	d.watch, d.watched = n, nil
	if n > 0 && d.tree.size() == n {
		d.watched = d.tree.root()
	}
}

// RootAt returns the root of the tree's first n events, kept when the tree
// passed n after Watch(n) (false: it did not, or n was not watched).
func (d *Digester) RootAt(n uint64) ([]byte, bool) {
	if n == 0 || n != d.watch || d.watched == nil {
		return nil, false
	}
	return d.watched, true
}

// ErrLogWentBack is wrapped by Digester.Check when the store no longer
// holds the last event the tree holds: the log went back (a failover that
// lost acknowledged writes) or was rewritten; the tree must be built again
// from the log as it is.
var ErrLogWentBack = errors.New("audit: the log no longer holds the last event the digest tree holds")

// Check asks the store whether it still holds the last event the tree
// holds, at its stream's version (one read). It returns an error wrapping
// ErrLogWentBack when not, naming what is there instead.
func (d *Digester) Check(ctx context.Context) error {
	e := d.lastEvent
	if e.id == "" {
		return nil
	}
	page, err := d.store.ReadStream(ctx, e.stream, e.version, 1)
	if err != nil {
		return fmt.Errorf("digest: check the tree's last event: %w", err)
	}
	switch {
	case len(page) == 0 || page[0].Version != e.version:
		return fmt.Errorf("%w: %s ends before version %d (event %s, position %s)", ErrLogWentBack, e.stream, e.version, e.id, positionText(d.last))
	case page[0].ID != e.id:
		return fmt.Errorf("%w: %s holds event %s at version %d, not %s (position %s)", ErrLogWentBack, e.stream, page[0].ID, e.version, e.id, positionText(d.last))
	}
	return nil
}

// LastEvent names the last event the tree holds: its stream, version and
// id ("" when none).
func (d *Digester) LastEvent() (stream string, version int64, id string) {
	return d.lastEvent.stream, d.lastEvent.version, d.lastEvent.id
}

func (d *Digester) broken(rec *eventstore.RecordedEvent, why string) {
	d.breaks++
	if d.firstBreak == "" {
		d.firstBreak = fmt.Sprintf("event %d (position %s, %s version %d): %s", d.tree.size(), rec.Position, rec.StreamID, rec.Version, why)
	}
}

// Sign returns a digest of the tree as it stands, stamped now and signed
// by s. It refuses (ErrChainBroken) when an event read carries a hash that
// does not match its content.
func (d *Digester) Sign(s *DigestSigner, now time.Time) (*Digest, error) {
	if d.breaks > 0 {
		return nil, fmt.Errorf("%w: %d events carry a hash their content does not match; the first is %s (run audit verify)", ErrChainBroken, d.breaks, d.firstBreak)
	}
	dg := &Digest{
		TreeSize: d.tree.size(), Root: hex.EncodeToString(d.tree.root()), Position: positionText(d.last),
		Time: now.UTC().Format(time.RFC3339Nano), BlockLevel: d.tree.blockLevel,
		Blocks: hexAll(d.tree.blocks), Tail: hexAll(d.tree.tail()),
	}
	if err := dg.sign(s); err != nil {
		return nil, fmt.Errorf("audit: sign digest: %w", err)
	}
	return dg, nil
}

// MakeDigest reads store's log from its start up to and including to (nil:
// its end as ReadAll shows it now) and signs a digest of it.
func MakeDigest(ctx context.Context, store eventstore.Store, to eventstore.Position, s *DigestSigner, now time.Time) (*Digest, error) {
	d := NewDigester(store)
	if _, err := d.CatchUp(ctx, to, DefaultMaxEvents); err != nil {
		return nil, err
	}
	return d.Sign(s, now)
}

func hexAll(hs [][]byte) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h)
	}
	return out
}
