package captoken

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
)

// verifiedPerGeneration bounds the signatures one key remembers having
// verified: two generations of at most this many (32 bytes each, 256 KiB
// at most per key with the maps' overhead). Presentations of one token
// come close together (a claim, its replays, a retried request), so a
// short memory is enough.
const verifiedPerGeneration = 4096

// verifiedSignatures remembers signatures its key verified, as the SHA-256
// of the signed message and the signature, so that a token presented again
// costs a hash instead of an Ed25519 verification. Verification is a pure
// function of the key, the message and the signature: remembering a
// success changes no answer. Only a signature that verified enters, so a
// forger adds nothing; what the caller judges besides the signature (the
// key's state in a ring, the payload) is judged on every presentation.
// Safe for concurrent use.
type verifiedSignatures struct {
	mu       sync.Mutex
	cur, old map[[sha256.Size]byte]struct{}
}

// verify reports whether sig is pub's signature of payload's signed
// message (signedMessage), from memory when it verified before.
func (m *verifiedSignatures) verify(pub ed25519.PublicKey, payload, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	// One buffer holds the message and, after it, the signature: their
	// hash is the memory's key (the signature's fixed size makes the two
	// one unambiguous string).
	buf := make([]byte, 0, len(Domain)+len(payload)+ed25519.SignatureSize)
	msg := append(append(buf, Domain...), payload...)
	key := sha256.Sum256(append(msg, sig...))
	if m.known(key) {
		return true
	}
	if !ed25519.Verify(pub, msg, sig) {
		return false
	}
	m.remember(key)
	return true
}

func (m *verifiedSignatures) known(key [sha256.Size]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, inCur := m.cur[key]
	_, inOld := m.old[key]
	return inCur || inOld
}

// remember adds key; a full generation becomes the old one, and the old
// one is dropped whole.
func (m *verifiedSignatures) remember(key [sha256.Size]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cur) >= verifiedPerGeneration {
		m.old, m.cur = m.cur, nil
	}
	if m.cur == nil {
		m.cur = make(map[[sha256.Size]byte]struct{})
	}
	m.cur[key] = struct{}{}
}

// size is how many signatures are remembered.
func (m *verifiedSignatures) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.old)
}
