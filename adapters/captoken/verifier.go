package captoken

import (
	"crypto/ed25519"
	"fmt"
)

// Verifier checks tokens against one public key. It is what a process needs
// that accepts tokens but never issues them. Safe for concurrent use.
type Verifier struct {
	pub      ed25519.PublicKey
	id       string
	verified verifiedSignatures
}

// NewVerifier returns a verifier for pub.
func NewVerifier(pub ed25519.PublicKey) (*Verifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("captoken: public key is %d bytes, an Ed25519 public key is %d", len(pub), ed25519.PublicKeySize)
	}
	pub = append(ed25519.PublicKey(nil), pub...)
	return &Verifier{pub: pub, id: keyID(pub)}, nil
}

// Verify checks token's shape, then its signature, then its payload, and
// returns its claims. Errors wrap ErrMalformed (not a token of this format)
// or ErrBadSignature (well formed, not signed by this key, or altered since;
// ErrUnknownKey when it names another key): callers refuse both as
// capability.invalid and may tell them apart in the evidence. Verify does
// not judge the expiry or whether the capability is still unused: the
// ledger does.
func (v *Verifier) Verify(token string) (Claims, error) {
	payload, sig, err := split(token)
	if err != nil {
		return Claims{}, err
	}
	if kid := peekKeyID(payload); kid != "" && kid != v.id {
		return Claims{}, ErrUnknownKey
	}
	return v.check(payload, sig)
}

// check verifies sig over payload with this key (a signature it verified
// before, from memory: see verifiedSignatures), then reads the payload.
func (v *Verifier) check(payload, sig []byte) (Claims, error) {
	if !v.verified.verify(v.pub, payload, sig) {
		return Claims{}, ErrBadSignature
	}
	c, err := unmarshalClaims(payload)
	if err != nil {
		// Signed by us and unreadable: a token of another version (or a bug).
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if c.KeyID != "" && c.KeyID != v.id {
		return Claims{}, fmt.Errorf("%w: signed by %s, names %s", ErrMalformed, v.id, c.KeyID)
	}
	return c, nil
}

// KeyID names the key without revealing anything usable: the first 8 hex
// digits of the SHA-256 of the public key. Safe to log.
func (v *Verifier) KeyID() string { return v.id }

// PublicKey returns a copy of the key tokens are checked against.
func (v *Verifier) PublicKey() ed25519.PublicKey { return append(ed25519.PublicKey(nil), v.pub...) }
