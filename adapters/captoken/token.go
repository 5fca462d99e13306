package captoken

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrMalformed means the text is not a token of this format: wrong shape,
// bad base64, an unreadable payload or an unknown version. It says nothing
// about who made it.
var ErrMalformed = errors.New("capability token malformed")

// ErrBadSignature means the token is well formed but its signature does not
// verify under this key: it was forged, altered, or signed by another key.
var ErrBadSignature = errors.New("capability token signature does not verify")

// ErrUnknownKey means the token names a signing key the ring does not hold
// (another deployment's, or one removed from the ring). It wraps
// ErrBadSignature: callers refuse it the same way.
var ErrUnknownKey = fmt.Errorf("%w: signed by a key this ring does not hold", ErrBadSignature)

// ErrRetiredKey means the token was signed by a key of the ring that is
// retired: past its verification window, or retired by an operator. It
// wraps ErrBadSignature.
var ErrRetiredKey = fmt.Errorf("%w: signed by a retired key", ErrBadSignature)

var b64 = base64.RawURLEncoding

// encode joins a payload and its signature into a token.
func encode(payload, sig []byte) string {
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(sig)
}

// split decodes a token's two parts. Every failure wraps ErrMalformed.
func split(token string) (payload, sig []byte, err error) {
	if token == "" {
		return nil, nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(token) > MaxTokenLength {
		return nil, nil, fmt.Errorf("%w: %d bytes long, at most %d", ErrMalformed, len(token), MaxTokenLength)
	}
	p, s, ok := strings.Cut(token, ".")
	if !ok || p == "" || s == "" || strings.Contains(s, ".") {
		return nil, nil, fmt.Errorf("%w: want two base64url parts joined by one dot", ErrMalformed)
	}
	if payload, err = b64.DecodeString(p); err != nil {
		return nil, nil, fmt.Errorf("%w: payload is not base64url: %v", ErrMalformed, err)
	}
	if sig, err = b64.DecodeString(s); err != nil {
		return nil, nil, fmt.Errorf("%w: signature is not base64url: %v", ErrMalformed, err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, nil, fmt.Errorf("%w: signature is %d bytes, an Ed25519 signature is %d", ErrMalformed, len(sig), ed25519.SignatureSize)
	}
	return payload, sig, nil
}

// signedMessage is what the signature covers.
func signedMessage(payload []byte) []byte {
	return append([]byte(Domain), payload...)
}

// peekKeyID returns the kid a payload names, without judging the payload:
// only to choose the key its signature is checked with ("" when it names
// none or is not JSON). The strict parse follows a valid signature.
func peekKeyID(payload []byte) string {
	var p struct {
		Kid string `json:"kid"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	return p.Kid
}

// ParseUnverified reads a token's claims without checking its signature.
// Never act on them: they are for describing a refused presentation (which
// capability a forged token claims to be), nothing else.
func ParseUnverified(token string) (Claims, error) {
	payload, _, err := split(token)
	if err != nil {
		return Claims{}, err
	}
	c, err := unmarshalClaims(payload)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return c, nil
}

// Fingerprint names a presented token without repeating it: the first 16
// hex digits of its SHA-256. Two presentations of the same text share it.
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}
