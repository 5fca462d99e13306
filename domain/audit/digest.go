package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"opledger/eventstore/chain"
)

// DigestFormat names the digest file format this build writes and reads.
const DigestFormat = "opledger-digest/1"

// Digest is a signed statement of the whole log up to one point: the root
// of the Merkle tree over its first TreeSize events in global order (see
// merkle.go), for auditors to keep outside the database. With it, Verify
// proves that those events are unchanged, none removed, inserted or
// reordered, and names where the log first departs from it; Prove and
// CheckProof show one operation's events are among them.
//
// The file is one JSON object; Signature is the base64 Ed25519 signature,
// by the key KeyID names, of the RFC 8785 canonical form of the object
// without its "signature" member, exactly as the file has it.
type Digest struct {
	Format string `json:"format"`
	// TreeSize is the number of events covered, from the start of the log:
	// the event count, and the Merkle tree's size.
	TreeSize uint64 `json:"tree_size"`
	// Root is the tree's root hash, hex.
	Root string `json:"root"`
	// Position is the global position of the last event covered, as the
	// store prints it ("" when the log was empty). Informative: the tree
	// does not cover positions, only the order.
	Position string `json:"position"`
	// Time is when the digest was made, RFC 3339 in UTC, by the clock of
	// whoever made it.
	Time string `json:"time"`
	// KeyID names the signing key (DigestVerifier.KeyID).
	KeyID string `json:"key_id"`
	// BlockLevel, Blocks and Tail let a verifier locate a departure: the
	// roots of the tree's aligned blocks of 2^BlockLevel events (at most
	// 1,024 of them) and the hashes of the subtrees after the last full
	// block, all hex. They are bound by Root (the root is recomputed from
	// them).
	BlockLevel uint     `json:"block_level"`
	Blocks     []string `json:"blocks"`
	Tail       []string `json:"tail"`
	Signature  string   `json:"signature"`

	// decoded forms, set by parse and sign
	root          []byte
	blocks, tail  [][]byte
	signedPayload []byte
}

// maxDigestSize bounds a digest file: 1,024 block roots and 64 tail
// hashes in hex are under 80 KiB.
const maxDigestSize = 256 << 10

// ErrBadDigest is wrapped when a digest file is malformed or inconsistent.
var ErrBadDigest = errors.New("audit: bad digest")

// ParseDigest reads a digest file strictly: one JSON object with exactly
// the members of Digest, valid hex, and block roots that recompute to the
// root. It does not check the signature (Verify does, given the key).
func ParseDigest(r io.Reader) (*Digest, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxDigestSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read: %w", ErrBadDigest, err)
	}
	if len(raw) > maxDigestSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadDigest, maxDigestSize)
	}
	if _, err := chain.Canonicalize(raw); err != nil { // JSON, no duplicate members
		return nil, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	var d Digest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	delete(members, "signature")
	body, err := json.Marshal(members)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	if d.signedPayload, err = chain.Canonicalize(body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	if err := d.decode(); err != nil {
		return nil, err
	}
	return &d, nil
}

// decode checks the fields and sets the decoded forms.
func (d *Digest) decode() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadDigest, fmt.Sprintf(format, args...))
	}
	if d.Format != DigestFormat {
		return bad("format %q, this build reads %q", d.Format, DigestFormat)
	}
	if _, err := time.Parse(time.RFC3339Nano, d.Time); err != nil {
		return bad("time %q is not RFC 3339", d.Time)
	}
	if d.KeyID == "" || d.Signature == "" {
		return bad("no key_id or no signature")
	}
	var err error
	if d.root, err = hex32(d.Root); err != nil {
		return bad("root: %v", err)
	}
	d.blocks, d.tail = make([][]byte, len(d.Blocks)), make([][]byte, len(d.Tail))
	for i, b := range d.Blocks {
		if d.blocks[i], err = hex32(b); err != nil {
			return bad("block %d: %v", i, err)
		}
	}
	for i, b := range d.Tail {
		if d.tail[i], err = hex32(b); err != nil {
			return bad("tail %d: %v", i, err)
		}
	}
	if len(d.Blocks) > maxBlocks {
		return bad("%d block roots, at most %d", len(d.Blocks), maxBlocks)
	}
	root, err := rootFromBlocks(d.TreeSize, d.BlockLevel, d.blocks, d.tail)
	if err != nil {
		return bad("blocks: %v", err)
	}
	if !bytes.Equal(root, d.root) {
		return bad("its block roots recompute to root %x, not the root it states", root)
	}
	return nil
}

func hex32(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("%q is not 64 hex digits", s)
	}
	return b, nil
}

// CheckSignature verifies the digest's signature with v.
func (d *Digest) CheckSignature(v *DigestVerifier) error {
	if v == nil {
		return errors.New("audit: a digest's signature needs the public key to check (--public-key)")
	}
	sig, err := base64.StdEncoding.DecodeString(d.Signature)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrBadSignature)
	}
	return v.verify(d.KeyID, d.signedPayload, sig)
}

// TimeValue is Time parsed.
func (d *Digest) TimeValue() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, d.Time)
	return t
}

// sign fills KeyID and Signature.
func (d *Digest) sign(s *DigestSigner) error {
	d.Format, d.KeyID, d.Signature = DigestFormat, s.KeyID(), ""
	unsigned := struct {
		Format     string   `json:"format"`
		TreeSize   uint64   `json:"tree_size"`
		Root       string   `json:"root"`
		Position   string   `json:"position"`
		Time       string   `json:"time"`
		KeyID      string   `json:"key_id"`
		BlockLevel uint     `json:"block_level"`
		Blocks     []string `json:"blocks"`
		Tail       []string `json:"tail"`
	}{d.Format, d.TreeSize, d.Root, d.Position, d.Time, d.KeyID, d.BlockLevel, d.Blocks, d.Tail}
	body, err := json.Marshal(unsigned)
	if err != nil {
		return err
	}
	if d.signedPayload, err = chain.Canonicalize(body); err != nil {
		return err
	}
	d.Signature = base64.StdEncoding.EncodeToString(s.sign(d.signedPayload))
	return d.decode()
}

// WriteJSON writes the digest file.
func (d *Digest) WriteJSON(w io.Writer) error { return writeJSON(w, "digest", d) }
