package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/transparency-dev/merkle/proof"

	"opledger/domain/strictjson"
)

// ConsistencyFormat names the consistency proof file format.
const ConsistencyFormat = "opledger-consistency/1"

// ConsistencyProof shows, without the log, that a later digest extends an
// earlier one: the log the later one covers begins with exactly the events
// the earlier one covers (RFC 6962 consistency, the hashes of the tree
// nodes between the two). Verify computes it from the log when given both
// digests (DigestCheck.ConsistencyProof of the previous one); anyone
// holding the two digests and the public key checks it with
// CheckConsistency. It carries no secret and needs no signature: the
// digests are signed, and the hashes either prove the extension between
// their roots or do not.
type ConsistencyProof struct {
	Format       string   `json:"format"`
	FromTreeSize uint64   `json:"from_tree_size"`
	FromRoot     string   `json:"from_root"`
	ToTreeSize   uint64   `json:"to_tree_size"`
	ToRoot       string   `json:"to_root"`
	Hashes       []string `json:"hashes"`
}

// maxConsistencyHashes bounds a proof: two per level of a tree of 2^64.
const maxConsistencyHashes = 128

// ErrNotConsistent is wrapped when a later digest is not proved to extend an
// earlier one.
var ErrNotConsistent = errors.New("audit: the later digest does not extend the earlier one")

// NewConsistencyProof is the proof a verify run found for previous and
// digest (check: the previous digest's DigestCheck, Extends true).
func NewConsistencyProof(previous, digest *Digest, check DigestCheck) (*ConsistencyProof, error) {
	if check.Extends == nil || !*check.Extends || check.Role != "previous" {
		return nil, fmt.Errorf("%w: the verify run did not prove it", ErrNotConsistent)
	}
	return &ConsistencyProof{Format: ConsistencyFormat, FromTreeSize: previous.TreeSize, FromRoot: previous.Root,
		ToTreeSize: digest.TreeSize, ToRoot: digest.Root, Hashes: check.ConsistencyProof}, nil
}

// WriteJSON writes the proof as one indented JSON object.
func (p *ConsistencyProof) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ParseConsistencyProof reads a proof file strictly (exact members, one
// object, the format this build writes).
func ParseConsistencyProof(r io.Reader) (*ConsistencyProof, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxDigestSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: consistency proof: read: %w", ErrBadDigest, err)
	}
	if len(raw) > maxDigestSize {
		return nil, fmt.Errorf("%w: consistency proof larger than %d bytes", ErrBadDigest, maxDigestSize)
	}
	var p ConsistencyProof
	if err := strictjson.DecodeObject(raw, &p, strictjson.Options{}); err != nil {
		return nil, fmt.Errorf("%w: consistency proof: %w", ErrBadDigest, err)
	}
	if p.Format != ConsistencyFormat {
		return nil, fmt.Errorf("%w: consistency proof format %q, this build reads %q", ErrBadDigest, p.Format, ConsistencyFormat)
	}
	if len(p.Hashes) > maxConsistencyHashes {
		return nil, fmt.Errorf("%w: consistency proof of %d hashes, at most %d", ErrBadDigest, len(p.Hashes), maxConsistencyHashes)
	}
	return &p, nil
}

// CheckConsistency checks, with no access to the log, that later extends
// earlier: both digests signed by key, the proof about exactly these two
// (sizes and roots), and its hashes recomputing both roots. A nil error
// means every event the earlier digest covers is, unchanged and in the
// same order, the start of what the later one covers.
func CheckConsistency(p *ConsistencyProof, earlier, later *Digest, key *DigestVerifier) error {
	if err := earlier.CheckSignature(key); err != nil {
		return fmt.Errorf("the earlier digest: %w", err)
	}
	if err := later.CheckSignature(key); err != nil {
		return fmt.Errorf("the later digest: %w", err)
	}
	switch {
	case earlier.TreeSize > later.TreeSize:
		return fmt.Errorf("%w: the earlier digest covers %d events, the later %d (give them in order)", ErrNotConsistent, earlier.TreeSize, later.TreeSize)
	case p.FromTreeSize != earlier.TreeSize || p.FromRoot != earlier.Root:
		return fmt.Errorf("%w: the proof starts from a tree of %d events with root %s, not the earlier digest's", ErrNotConsistent, p.FromTreeSize, p.FromRoot)
	case p.ToTreeSize != later.TreeSize || p.ToRoot != later.Root:
		return fmt.Errorf("%w: the proof ends at a tree of %d events with root %s, not the later digest's", ErrNotConsistent, p.ToTreeSize, p.ToRoot)
	}
	hashes := make([][]byte, len(p.Hashes))
	for i, h := range p.Hashes {
		b, err := hex32(h)
		if err != nil {
			return fmt.Errorf("%w: consistency proof hash %d: %v", ErrBadDigest, i, err)
		}
		hashes[i] = b
	}
	if err := proof.VerifyConsistency(treeHasher, earlier.TreeSize, later.TreeSize, hashes, earlier.root, later.root); err != nil {
		return fmt.Errorf("%w: %v", ErrNotConsistent, err)
	}
	return nil
}
