package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// DigestSigner signs digests with an Ed25519 key of its own: never the key
// that signs capability tokens, so that whoever may mint authority cannot
// vouch for history, and the other way round. It never prints its key.
type DigestSigner struct {
	priv ed25519.PrivateKey
	*DigestVerifier
}

// NewDigestSigner returns a signer for a 32-byte Ed25519 seed.
func NewDigestSigner(seed []byte) (*DigestSigner, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("audit: digest key seed is %d bytes, an Ed25519 seed is %d", len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	v, err := NewDigestVerifier(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return &DigestSigner{priv: priv, DigestVerifier: v}, nil
}

func (s *DigestSigner) String() string { return "audit.DigestSigner(key " + s.KeyID() + ")" }

func (s *DigestSigner) sign(msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

// DigestVerifier checks digest signatures with a public key, and is all an
// auditor needs besides the digest.
type DigestVerifier struct {
	pub ed25519.PublicKey
	id  string
}

// NewDigestVerifier returns a verifier for a 32-byte Ed25519 public key.
func NewDigestVerifier(pub ed25519.PublicKey) (*DigestVerifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("audit: digest public key is %d bytes, an Ed25519 public key is %d", len(pub), ed25519.PublicKeySize)
	}
	sum := sha256.Sum256(pub)
	return &DigestVerifier{pub: pub, id: "digest-" + hex.EncodeToString(sum[:8])}, nil
}

// KeyID names the key: "digest-" and the first 8 bytes of the SHA-256 of
// the public key, in hex. Digests carry it.
func (v *DigestVerifier) KeyID() string { return v.id }

// PublicKey returns the public key.
func (v *DigestVerifier) PublicKey() ed25519.PublicKey { return v.pub }

// ErrBadSignature is wrapped when a digest's signature does not verify
// under the key given, or the digest names another key.
var ErrBadSignature = errors.New("audit: digest signature does not verify")

func (v *DigestVerifier) verify(keyID string, msg, sig []byte) error {
	if keyID != v.id {
		return fmt.Errorf("%w: the digest names key %s, the public key given is %s", ErrBadSignature, keyID, v.id)
	}
	if !ed25519.Verify(v.pub, msg, sig) {
		return fmt.Errorf("%w under key %s: the digest was altered or signed by another key", ErrBadSignature, v.id)
	}
	return nil
}
