package captoken

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"opledger/domain"
)

// SeedSize is the size of an Ed25519 seed, the secret a key file holds.
const SeedSize = ed25519.SeedSize

// Signer issues and verifies tokens with one Ed25519 key. Safe for
// concurrent use. It never prints its key: not in errors, not in String.
type Signer struct {
	priv ed25519.PrivateKey
	*Verifier
	ephemeral bool
}

// NewSigner returns a signer for a 32-byte Ed25519 seed.
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("captoken: seed is %d bytes, an Ed25519 seed is %d", len(seed), SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	v, err := NewVerifier(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return &Signer{priv: priv, Verifier: v}, nil
}

// NewEphemeral returns a signer with a fresh random key that exists only in
// this process: tokens it issues stop verifying when the process ends. For
// `serve --dev` only; callers should warn loudly when they use it.
func NewEphemeral() (*Signer, error) {
	seed := make([]byte, SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("captoken: ephemeral key: %w", err)
	}
	s, err := NewSigner(seed)
	if err != nil {
		return nil, err
	}
	s.ephemeral = true
	return s, nil
}

// Ephemeral reports whether the key was made by NewEphemeral.
func (s *Signer) Ephemeral() bool { return s.ephemeral }

// Sign returns the token for c, naming this key (whatever key c.KeyID
// named: a token always names the key that signed it). The same claims
// always give the same token. Only the current Version is written.
func (s *Signer) Sign(c Claims) (string, error) {
	if c.Version == 0 {
		c.Version = Version
	}
	if c.Version != Version {
		return "", fmt.Errorf("captoken: sign: version %d, this build writes %d", c.Version, Version)
	}
	c.KeyID = s.KeyID()
	if err := c.validate(); err != nil {
		return "", fmt.Errorf("captoken: sign: %w", err)
	}
	payload, err := c.marshal()
	if err != nil {
		return "", fmt.Errorf("captoken: sign: %w", err)
	}
	return encode(payload, ed25519.Sign(s.priv, signedMessage(payload))), nil
}

// TokenFor returns the token of a capability issued on operation op, as the
// API answers it and as a relay publishing the CapabilityIssued event
// should carry it.
func (s *Signer) TokenFor(op domain.OperationID, ev domain.CapabilityIssued) (string, error) {
	return s.Sign(ClaimsFor(op, ev))
}

// String names the key by its KeyID only.
func (s *Signer) String() string { return "captoken.Signer(key " + s.KeyID() + ")" }

// keyIDLength is the length of a key id: 8 hex digits.
const keyIDLength = 8

func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:keyIDLength/2])
}

// validKeyID reports whether s has the form of a key id.
func validKeyID(s string) bool {
	if len(s) != keyIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}
