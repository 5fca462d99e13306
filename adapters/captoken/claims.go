package captoken

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"opledger/domain"
)

// Version is the token format this package writes: version 2 names the
// signing key (kid). Version 1 tokens (no kid), issued before key rings,
// are still read and verified against every key of the ring that verifies.
const Version = 2

// versionNoKeyID is the format that named no key.
const versionNoKeyID = 1

// Domain separates these signatures from anything else the same key might
// ever sign: the signed message is Domain followed by the payload bytes.
// Both versions sign under it (the payload's "v" tells them apart).
const Domain = "opledger.capability-token.v1\x00"

// MaxTokenLength bounds a token presented for verification. A genuine token
// is a few hundred bytes; anything longer is refused before decoding.
const MaxTokenLength = 2048

// Claims is what a token asserts: the key that signed it, the capability,
// the operation and attempt it is bound to, and its expiry.
type Claims struct {
	Version int
	// KeyID names the signing key (version 2); empty in version 1 tokens.
	KeyID        string
	CapabilityID domain.CapabilityID
	OperationID  domain.OperationID
	Attempt      int
	ExpiresAt    time.Time
}

// payload is the wire form of Claims. Field order is the JSON order, which
// keeps the encoding (and so the signature) deterministic.
type payload struct {
	V   int    `json:"v"`
	Kid string `json:"kid,omitempty"`
	Cap string `json:"cap"`
	Op  string `json:"op"`
	Att int    `json:"att"`
	Exp string `json:"exp"` // RFC 3339, UTC (fractional seconds only in tokens of earlier builds)
}

// ClaimsFor returns the claims of a capability issued on operation op (the
// signer fills in its key id). Its expiry is the capability's to the second,
// rounded down: a token never says its capability lives longer than the
// ledger's record, which alone decides (the claim checks the record, not
// the token). Tokens of earlier builds carry nanoseconds and still verify.
func ClaimsFor(op domain.OperationID, ev domain.CapabilityIssued) Claims {
	return Claims{Version: Version, CapabilityID: ev.CapabilityID, OperationID: op, Attempt: ev.Attempt, ExpiresAt: ev.ExpiresAt.UTC().Truncate(time.Second)}
}

// validate checks claims before they are signed or after they are read.
func (c Claims) validate() error {
	switch c.Version {
	case Version:
		if !validKeyID(c.KeyID) {
			return fmt.Errorf("kid %q: want %d lowercase hex digits", c.KeyID, keyIDLength)
		}
	case versionNoKeyID:
		if c.KeyID != "" {
			return fmt.Errorf("version %d names no key, got kid %q", versionNoKeyID, c.KeyID)
		}
	default:
		return fmt.Errorf("version %d, this build reads %d and %d", c.Version, versionNoKeyID, Version)
	}
	if _, err := domain.ParseCapabilityID(string(c.CapabilityID)); err != nil {
		return err
	}
	if _, err := domain.ParseOperationID(string(c.OperationID)); err != nil {
		return err
	}
	if c.Attempt < 1 {
		return fmt.Errorf("attempt %d, must be at least 1", c.Attempt)
	}
	if c.ExpiresAt.IsZero() {
		return fmt.Errorf("no expiry")
	}
	return nil
}

func (c Claims) marshal() ([]byte, error) {
	return json.Marshal(payload{
		V: c.Version, Kid: c.KeyID, Cap: string(c.CapabilityID), Op: string(c.OperationID), Att: c.Attempt,
		Exp: c.ExpiresAt.UTC().Format(time.RFC3339Nano),
	})
}

// unmarshalClaims parses a payload strictly: it must be exactly the bytes
// this package writes for the claims it holds. That refuses unknown, missing,
// duplicated, reordered or differently-cased fields, whitespace and trailing
// data in one rule (encoding/json alone would match names case-insensitively,
// skip unknown ones and let a duplicate's last value win).
func unmarshalClaims(data []byte) (Claims, error) {
	var p payload
	if err := json.Unmarshal(data, &p); err != nil {
		return Claims{}, fmt.Errorf("payload: %w", err)
	}
	exp, err := time.Parse(time.RFC3339Nano, p.Exp)
	if err != nil {
		return Claims{}, fmt.Errorf("payload: exp: %w", err)
	}
	c := Claims{Version: p.V, KeyID: p.Kid, CapabilityID: domain.CapabilityID(p.Cap), OperationID: domain.OperationID(p.Op), Attempt: p.Att, ExpiresAt: exp.UTC()}
	if err := c.validate(); err != nil {
		return Claims{}, fmt.Errorf("payload: %w", err)
	}
	canonical, err := c.marshal()
	if err != nil {
		return Claims{}, fmt.Errorf("payload: %w", err)
	}
	if !bytes.Equal(canonical, data) {
		return Claims{}, fmt.Errorf("payload: not in canonical form (exact field names, once each, in order, no whitespace)")
	}
	return c, nil
}
