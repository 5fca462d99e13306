package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/transparency-dev/merkle/proof"

	"opledger/domain"
	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// ProofFormat names the proof file format this build writes and reads.
const ProofFormat = "opledger-proof/1"

// MaxProofEvents bounds the events one proof holds (an operation's stream
// is a few dozen events; lease renewals make it longer).
const MaxProofEvents = 10_000

// Proof is a self-contained proof that one operation's events, as listed,
// are in a digested log, in this order, each linked to the one before it:
// its events as stored (data and metadata as the store returned them), the
// hash chain through them, and each one's RFC 6962 inclusion path to the
// digest's root. CheckProof verifies it with nothing but the digest and
// its public key.
//
// What it does not prove: that the stream has no event after the last one
// listed (an inclusion proof cannot show absence: whoever made the proof
// could leave a later event out), and anything about events after the
// digest.
type Proof struct {
	Format    string             `json:"format"`
	Operation domain.OperationID `json:"operation_id"`
	Stream    string             `json:"stream"`
	// TreeSize, Root and KeyID name the digest the proof is against.
	TreeSize uint64        `json:"tree_size"`
	Root     string        `json:"root"`
	KeyID    string        `json:"key_id"`
	Events   []ProvedEvent `json:"events"`
}

// ProvedEvent is one event of a proof.
type ProvedEvent struct {
	// Index is the event's place in the log (its leaf); Position its
	// global position (informative).
	Index    uint64          `json:"index"`
	Position string          `json:"position"`
	Version  int64           `json:"version"`
	EventID  string          `json:"event_id"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// PrevHash and Hash are the event's chain link (hex): the hash it links
	// to and its own, which CheckProof recomputes from the fields above.
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
	// Unhashed marks an event stored before hashing began: its inclusion
	// in the digest is proved, its link to the event before it is not.
	Unhashed bool `json:"unhashed,omitempty"`
	// Inclusion is the RFC 6962 inclusion path of the event's leaf (hex).
	Inclusion []string `json:"inclusion"`
}

// ErrLogDeparts is wrapped by Prove when the log no longer matches the
// digest: no proof against it can be made from this log.
var ErrLogDeparts = errors.New("audit: the log departs from the digest")

// pendingProof is an event found during Prove's pass, waiting for the
// nodes right of it.
type pendingProof struct {
	event  ProvedEvent
	nodes  proof.Nodes
	hashes [][]byte // by nodes.IDs; those left of the event filled at once
}

// Prove reads the log's first d.TreeSize events once and returns a proof
// for the events of operation op among them. It fails when the log no
// longer matches the digest (ErrLogDeparts: run Verify with it), when op
// has no event in it, or past MaxProofEvents. Memory: the proof and
// O(log n) hashes per event of op.
func Prove(ctx context.Context, store eventstore.Store, op domain.OperationID, d *Digest) (*Proof, error) {
	stream := op.StreamName()
	out := &Proof{Format: ProofFormat, Operation: op, Stream: stream, TreeSize: d.TreeSize, Root: d.Root, KeyID: d.KeyID}
	tree := newLogTree()
	var pending []*pendingProof
	pages, stop := readAhead(ctx, store, nil, nil, digesterPage, int64(d.TreeSize)+digesterPage, linkOnly)
	defer stop()
	for p := range pages {
		if p.err != nil {
			return nil, fmt.Errorf("prove %s: %w", op, p.err)
		}
		for i := range p.events {
			if tree.size() >= d.TreeSize {
				break
			}
			rec, prep := &p.events[i], p.decoded[i]
			if prep.linkErr != nil {
				return nil, fmt.Errorf("prove %s: %w: event %d (position %s) cannot be rehashed: %v", op, ErrLogDeparts, tree.size(), rec.Position, prep.linkErr)
			}
			if rec.StreamID == stream {
				if len(pending) >= MaxProofEvents {
					return nil, fmt.Errorf("prove %s: more than %d events (MaxProofEvents)", op, MaxProofEvents)
				}
				pp, err := newPending(tree, d.TreeSize, ProvedEvent{
					Index: tree.size(), Position: rec.Position.String(), Version: rec.Version, EventID: rec.ID, Type: rec.Type,
					Data: json.RawMessage(rec.Data), Metadata: json.RawMessage(rec.Metadata),
					PrevHash: prep.link.Prev.String(), Hash: prep.link.Hash.String(), Unhashed: !prep.link.Hashed,
				})
				if err != nil {
					return nil, err
				}
				pending = append(pending, pp)
			}
			tree.append(prep.link.Hash)
		}
		if tree.size() >= d.TreeSize {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("prove %s: %w", op, err)
	}
	if tree.size() < d.TreeSize {
		return nil, fmt.Errorf("prove %s: %w: the log holds %d events, the digest covers %d", op, ErrLogDeparts, tree.size(), d.TreeSize)
	}
	if root := tree.root(); !bytes.Equal(root, d.root) {
		return nil, fmt.Errorf("prove %s: %w: its first %d events hash to root %x, the digest's is %s (run audit verify --digest)", op, ErrLogDeparts, d.TreeSize, root, d.Root)
	}
	if len(pending) == 0 {
		return nil, fmt.Errorf("prove %s: the digest's %d events hold no event of %s", op, d.TreeSize, stream)
	}
	for _, pp := range pending {
		for k, id := range pp.nodes.IDs {
			if pp.hashes[k] == nil {
				pp.hashes[k] = tree.want[id]
			}
			if pp.hashes[k] == nil {
				return nil, fmt.Errorf("prove %s: bug: node %v of event %d's path was not computed", op, id, pp.event.Index)
			}
		}
		path, err := pp.nodes.Rehash(pp.hashes, treeHasher.HashChildren)
		if err != nil {
			return nil, fmt.Errorf("prove %s: %w", op, err)
		}
		pp.event.Inclusion = hexAll(path)
		out.Events = append(out.Events, pp.event)
	}
	return out, nil
}

// newPending starts the inclusion path of the leaf about to be appended
// to tree: the nodes left of it are the tree's compact range now; those
// right of it are captured as the tree grows.
func newPending(tree *logTree, size uint64, e ProvedEvent) (*pendingProof, error) {
	nodes, err := proof.Inclusion(e.Index, size)
	if err != nil {
		return nil, err
	}
	left := tree.nodesBefore()
	pp := &pendingProof{event: e, nodes: nodes, hashes: make([][]byte, len(nodes.IDs))}
	for k, id := range nodes.IDs {
		if _, end := id.Coverage(); end <= e.Index {
			if pp.hashes[k] = left[id]; pp.hashes[k] == nil {
				return nil, fmt.Errorf("bug: left node %v of leaf %d not in the compact range", id, e.Index)
			}
			continue
		}
		tree.want[id] = nil
	}
	return pp, nil
}

// maxProofSize bounds a proof file.
const maxProofSize = 64 << 20

// ParseProof reads a proof file strictly: exactly the members of Proof.
func ParseProof(r io.Reader) (*Proof, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxProofSize+1))
	if err != nil {
		return nil, fmt.Errorf("proof: read: %w", err)
	}
	if len(raw) > maxProofSize {
		return nil, fmt.Errorf("proof: larger than %d bytes", maxProofSize)
	}
	if _, err := chain.Canonicalize(raw); err != nil {
		return nil, fmt.Errorf("proof: %w", err)
	}
	var p Proof
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("proof: %w", err)
	}
	if p.Format != ProofFormat {
		return nil, fmt.Errorf("proof: format %q, this build reads %q", p.Format, ProofFormat)
	}
	return &p, nil
}

// WriteJSON writes the proof file.
func (p *Proof) WriteJSON(w io.Writer) error { return writeJSON(w, "proof", p) }

// ProofCheck is what CheckProof found.
type ProofCheck struct {
	OK       bool               `json:"ok"`
	Digest   DigestCheck        `json:"digest"`
	Events   []ProvedEventCheck `json:"events"`
	Problems []string           `json:"problems"`
}

// ProvedEventCheck is one event's verdict.
type ProvedEventCheck struct {
	Version  int64  `json:"version"`
	Type     string `json:"type"`
	Index    uint64 `json:"index"`
	Included bool   `json:"included"` // its leaf is in the digest's tree
	Linked   bool   `json:"linked"`   // its hash is its content's, linked to the one before it
	Problem  string `json:"problem,omitempty"`
}

// CheckProof verifies a proof offline: the digest's signature with v, that
// the proof is against that digest, and for every event that its hash is
// the one recomputed from its content and link, that it links to the event
// before it (version 0 to chain.Genesis), and that its leaf is included in
// the digest's tree at its index. An error means the inputs could not be
// checked at all (a bad signature included); a ProofCheck that is not OK
// lists what failed.
func CheckProof(p *Proof, d *Digest, v *DigestVerifier) (ProofCheck, error) {
	if err := d.CheckSignature(v); err != nil {
		return ProofCheck{}, err
	}
	res := ProofCheck{Digest: DigestCheck{Role: "digest", TreeSize: d.TreeSize, Root: d.Root, Position: d.Position, Time: d.Time, KeyID: d.KeyID}}
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
	if p.TreeSize != d.TreeSize || p.Root != d.Root || p.KeyID != d.KeyID {
		problem("the proof is against the digest of %d events, root %s, key %s; this digest covers %d events, root %s, key %s",
			p.TreeSize, p.Root, p.KeyID, d.TreeSize, d.Root, d.KeyID)
	}
	if len(p.Events) == 0 {
		problem("the proof holds no event")
	}
	if p.Stream != p.Operation.StreamName() {
		problem("stream %q is not operation %s's stream", p.Stream, p.Operation)
	}
	prevHash, prevHashed := chain.Genesis, false
	var prevIndex uint64
	for i, e := range p.Events {
		c := ProvedEventCheck{Version: e.Version, Type: e.Type, Index: e.Index}
		fail := func(format string, args ...any) {
			if c.Problem == "" {
				c.Problem = fmt.Sprintf(format, args...)
				problem("version %d (%s): %s", e.Version, e.Type, c.Problem)
			}
		}
		hash, herr := chain.ParseHash(e.Hash)
		prev, perr := chain.ParseHash(e.PrevHash)
		content, cerr := chain.Content(p.Stream, e.EventID, e.Type, e.Data, e.Metadata)
		switch {
		case herr != nil || perr != nil:
			fail("malformed hash: %v", errors.Join(herr, perr))
		case cerr != nil:
			fail("content cannot be hashed: %v", cerr)
		case chain.Link(prev, e.Version, content) != hash:
			fail("its hash is not the hash of its content: the event was changed")
		default:
			c.Linked = true
		}
		switch {
		case e.Version != int64(i):
			fail("versions must run 0, 1, 2, ... from the stream's first event; found %d at place %d", e.Version, i)
			c.Linked = false
		case i > 0 && e.Index <= prevIndex:
			fail("index %d does not follow index %d: the events are out of the log's order", e.Index, prevIndex)
			c.Linked = false
		case c.Linked && e.Unhashed && prev != chain.Genesis:
			fail("an event stored before hashing began is recomputed from the genesis value")
			c.Linked = false
		case c.Linked && !e.Unhashed:
			want := chain.Genesis
			if i > 0 && prevHashed {
				want = prevHash
			}
			if prev != want {
				fail("it does not link to the event before it: an event between them is missing or was changed")
				c.Linked = false
			}
		}
		if herr == nil {
			path := make([][]byte, len(e.Inclusion))
			var err error
			for k, h := range e.Inclusion {
				if path[k], err = hex32(h); err != nil {
					break
				}
			}
			if err == nil {
				err = proof.VerifyInclusion(treeHasher, e.Index, d.TreeSize, leafHash(hash), path, d.root)
			}
			if err != nil {
				fail("not included in the digest's tree at index %d: %v", e.Index, err)
			} else {
				c.Included = true
			}
		}
		prevHash, prevHashed, prevIndex = hash, !e.Unhashed, e.Index
		res.Events = append(res.Events, c)
	}
	res.OK = len(res.Problems) == 0
	return res, nil
}

// WriteText writes the verdict for people.
func (c ProofCheck) WriteText(w io.Writer) error {
	var b bytes.Buffer
	verdict := "OK: every event is included in the digest and linked to the one before it"
	if !c.OK {
		verdict = fmt.Sprintf("FAILED: %d problems", len(c.Problems))
	}
	fmt.Fprintf(&b, "audit check-proof: %s\n", verdict)
	fmt.Fprintf(&b, "digest: %d events up to %s, %s, key %s (signature verified)\n", c.Digest.TreeSize, orNone(c.Digest.Position), c.Digest.Time, c.Digest.KeyID)
	rows := make([][]string, 0, len(c.Events))
	for _, e := range c.Events {
		rows = append(rows, []string{itoa(e.Version), e.Type, fmt.Sprint(e.Index), yesNo(e.Included), yesNo(e.Linked), dash(e.Problem)})
	}
	table(&b, []string{"Ver", "Event", "Leaf", "Included", "Linked", "Problem"}, rows)
	b.WriteString("(a proof shows these events are in the digested log; it cannot show that no later event of the stream exists)\n")
	return writeAll(w, "proof check", &b)
}

// WriteJSON writes the verdict as JSON.
func (c ProofCheck) WriteJSON(w io.Writer) error {
	if c.Problems == nil {
		c.Problems = []string{}
	}
	return writeJSON(w, "proof check", c)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}
