package captoken

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"opledger/domain"
)

// Version is the token format this package writes and reads. A token of any
// other version is malformed to this build.
const Version = 1

// Domain separates these signatures from anything else the same key might
// ever sign: the signed message is Domain followed by the payload bytes.
const Domain = "opledger.capability-token.v1\x00"

// MaxTokenLength bounds a token presented for verification. A genuine token
// is a few hundred bytes; anything longer is refused before decoding.
const MaxTokenLength = 2048

// Claims is what a token asserts: the capability, the operation and attempt
// it is bound to, and its expiry.
type Claims struct {
	Version      int
	CapabilityID domain.CapabilityID
	OperationID  domain.OperationID
	Attempt      int
	ExpiresAt    time.Time
}

// payload is the wire form of Claims. Field order is the JSON order, which
// keeps the encoding (and so the signature) deterministic.
type payload struct {
	V   int    `json:"v"`
	Cap string `json:"cap"`
	Op  string `json:"op"`
	Att int    `json:"att"`
	Exp string `json:"exp"` // RFC 3339 with nanoseconds, UTC
}

// ClaimsFor returns the claims of a capability issued on operation op.
func ClaimsFor(op domain.OperationID, ev domain.CapabilityIssued) Claims {
	return Claims{Version: Version, CapabilityID: ev.CapabilityID, OperationID: op, Attempt: ev.Attempt, ExpiresAt: ev.ExpiresAt}
}

// validate checks claims before they are signed or after they are read.
func (c Claims) validate() error {
	if c.Version != Version {
		return fmt.Errorf("version %d, this build reads %d", c.Version, Version)
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
		V: c.Version, Cap: string(c.CapabilityID), Op: string(c.OperationID), Att: c.Attempt,
		Exp: c.ExpiresAt.UTC().Format(time.RFC3339Nano),
	})
}

// unmarshalClaims parses a payload strictly: unknown fields and trailing
// data are refused.
func unmarshalClaims(data []byte) (Claims, error) {
	var p payload
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Claims{}, fmt.Errorf("payload: %w", err)
	}
	if dec.More() {
		return Claims{}, fmt.Errorf("payload: trailing data")
	}
	exp, err := time.Parse(time.RFC3339Nano, p.Exp)
	if err != nil {
		return Claims{}, fmt.Errorf("payload: exp: %w", err)
	}
	c := Claims{Version: p.V, CapabilityID: domain.CapabilityID(p.Cap), OperationID: domain.OperationID(p.Op), Attempt: p.Att, ExpiresAt: exp.UTC()}
	if err := c.validate(); err != nil {
		return Claims{}, fmt.Errorf("payload: %w", err)
	}
	return c, nil
}
