// Package chain defines the hash chain through every stream of an event
// store: what an event's hash covers, how it links to its predecessor, and
// the genesis value the first event of a stream links to. Every backend
// computes the chain at append with these functions (the PostgreSQL
// backend's statement checks that the stream's stored head is the hash the
// links were computed from), and the audit recomputes it from what a
// backend returns.
//
// An event's hash is
//
//	content = SHA-256(JCS({"data": D, "event_id": I, "metadata": M, "stream": S, "type": T}))
//	hash    = SHA-256("opledger/event/v1" || prev || uint64be(version) || content)
//
// where JCS is RFC 8785 canonical JSON (see Canonicalize: numbers must be
// exact), D and M are the event's stored data and metadata ("data" and
// "metadata" are left out when the event has none), and prev is the hash of
// the event before it in its stream, or Genesis for the first (and for an
// event whose predecessor was stored before hashing began and so carries no
// hash). The hash covers the stored form: an upcaster that reads an old
// schema version differently never changes it (upcasters therefore run
// above the eventstore port; backends return the stored bytes). It does not cover the
// store's own recorded time or global position; the global order is
// covered by the Merkle tree of the audit's digests.
package chain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
)

// Size is the length of a hash in bytes.
const Size = sha256.Size

// Hash is a SHA-256 chain hash.
type Hash [Size]byte

// String is the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText implements encoding.TextMarshaler (lowercase hex).
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (64 hex digits).
func (h *Hash) UnmarshalText(text []byte) error {
	p, err := ParseHash(string(text))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// ParseHash reads 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*Size {
		return h, fmt.Errorf("hash %q: want %d hex digits", s, 2*Size)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("hash %q: not hex", s)
	}
	return h, nil
}

// FromBytes reads a stored hash: 32 bytes, or nil for an event stored
// before hashing began (ok false). Any other length is an error.
func FromBytes(b []byte) (h Hash, ok bool, err error) {
	switch len(b) {
	case 0:
		return h, false, nil
	case Size:
		copy(h[:], b)
		return h, true, nil
	}
	return h, false, fmt.Errorf("stored hash has %d bytes, want %d", len(b), Size)
}

// Genesis is what the first event of every stream links to:
// SHA-256("opledger/genesis/v1"), that is
// 979dded55cf983da78ddca07ec30cd5d23f624483742816c31e68e8744fe2247: a stated
// constant, not zero, so that a zeroed column never passes for it.
var Genesis = Hash(sha256.Sum256([]byte("opledger/genesis/v1")))

// LinkTag prefixes the input of every link hash, keeping it apart from any
// other SHA-256 input (the content digests are JSON; Merkle nodes begin
// with 0x00 or 0x01).
const LinkTag = "opledger/event/v1"

// Link is an event's hash from its predecessor's (or Genesis), its stream
// version and its content digest.
func Link(prev Hash, version int64, content Hash) Hash {
	var buf [len(LinkTag) + Size + 8 + Size]byte
	n := copy(buf[:], LinkTag)
	n += copy(buf[n:], prev[:])
	binary.BigEndian.PutUint64(buf[n:], uint64(version))
	n += 8
	copy(buf[n:], content[:])
	return sha256.Sum256(buf[:])
}

// Links returns the hashes of events appended after prev (the stream's
// head hash, or Genesis) starting at version first, one per content
// digest: what an append stores.
func Links(prev Hash, first int64, contents []Hash) []Hash {
	out := make([]Hash, len(contents))
	for i, c := range contents {
		prev = Link(prev, first+int64(i), c)
		out[i] = prev
	}
	return out
}

// bufPool recycles the buffers content digests are built in.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Content is an event's content digest: SHA-256 of the canonical JSON of
// its stream, id, type, data and metadata (absent data or metadata, nil
// or empty, is left out). It fails, wrapping ErrNotCanonicalizable, when
// data or metadata is not JSON Canonicalize accepts.
func Content(stream, eventID, eventType string, data, metadata []byte) (Hash, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b := (*bp)[:0]
	var err error
	// Members in RFC 8785 order: data, event_id, metadata, stream, type.
	b = append(b, '{')
	if len(data) > 0 {
		b = append(b, `"data":`...)
		if b, err = appendCanonical(b, data, true); err != nil {
			return Hash{}, fmt.Errorf("data: %w", err)
		}
		b = append(b, ',')
	}
	b = append(b, `"event_id":`...)
	b = appendString(b, eventID)
	if len(metadata) > 0 {
		b = append(b, `,"metadata":`...)
		if b, err = appendCanonical(b, metadata, true); err != nil {
			return Hash{}, fmt.Errorf("metadata: %w", err)
		}
	}
	b = append(b, `,"stream":`...)
	b = appendString(b, stream)
	b = append(b, `,"type":`...)
	b = appendString(b, eventType)
	b = append(b, '}')
	*bp = b
	return sha256.Sum256(b), nil
}

// Recomputed is an event's hash recomputed from what a store returned.
type Recomputed struct {
	// Hash is Link(prev, version, content) over the event's content as
	// returned, where prev is its stored prev hash (Genesis when it has
	// none): what its stored hash must be.
	Hash Hash
	// Prev is the prev hash used: the stored one, or Genesis.
	Prev Hash
	// Stored is the stored hash, if Hashed.
	Stored Hash
	// Hashed reports whether the event carries a hash (false: stored
	// before hashing began).
	Hashed bool
}

// Matches reports whether the stored hash is the recomputed one.
func (r Recomputed) Matches() bool { return r.Hashed && r.Stored == r.Hash }

// Recompute recomputes an event's hash from its stored fields. An error
// means the content cannot be hashed (not canonicalizable JSON) or a stored
// hash is malformed: either is itself a sign of tampering.
func Recompute(stream, eventID, eventType string, version int64, data, metadata, storedPrev, storedHash []byte) (Recomputed, error) {
	var r Recomputed
	stored, hashed, err := FromBytes(storedHash)
	if err != nil {
		return r, fmt.Errorf("hash: %w", err)
	}
	prev, hasPrev, err := FromBytes(storedPrev)
	if err != nil {
		return r, fmt.Errorf("prev hash: %w", err)
	}
	if !hasPrev {
		prev = Genesis
	}
	content, err := Content(stream, eventID, eventType, data, metadata)
	if err != nil {
		return r, err
	}
	r.Hash, r.Prev, r.Stored, r.Hashed = Link(prev, version, content), prev, stored, hashed
	return r, nil
}
