package captoken

import (
	"cmp"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"

	"opledger/domain"
)

// RetentionSlack is added to the longest capability lifetime to give a
// key's verification window: it covers clocks of serve instances that
// disagree by minutes about when a key stopped signing.
const RetentionSlack = 10 * time.Minute

// DefaultRetention is how long a key keeps verifying after it stopped
// signing: a token it signed at its last moment lives at most
// domain.MaxCapabilityTTL.
const DefaultRetention = domain.MaxCapabilityTTL + RetentionSlack

// MaxRingKeys bounds a ring: a version 1 token (no kid) is checked against
// every key that verifies.
const MaxRingKeys = 64

// Key is one signing key of a ring, as its file records it. A key signs
// from Activates until the next key of the ring activates; it then verifies
// for the ring's retention and retires by itself. An operator may retire it
// sooner (Retired), which also erases its seed from the file.
type Key struct {
	ID        string
	Created   time.Time
	Activates time.Time // when it starts signing; Created unless scheduled
	Retired   time.Time // zero: not retired by an operator
	signer    *Signer   // nil when the file holds no seed (retired keys)
}

// HasSeed reports whether the key's secret is present.
func (k Key) HasSeed() bool { return k.signer != nil }

// PublicKey returns the key's public key, or nil when the file holds no
// seed (a retired key).
func (k Key) PublicKey() ed25519.PublicKey {
	if k.signer == nil {
		return nil
	}
	return k.signer.PublicKey()
}

// signedAtAll reports whether the key ever signed (or will): a key retired
// before it activated never did, and takes no part in the succession.
func (k Key) signedAtAll() bool { return k.Retired.IsZero() || k.Retired.After(k.Activates) }

// KeyState is where a key is in its life at a given time.
type KeyState string

// The states of a key.
const (
	// KeyPending: made, not yet signing (its Activates is ahead); it already
	// verifies, so instances that switch first are understood by the rest.
	KeyPending KeyState = "pending"
	// KeyActive: the key new tokens are signed with. One per ring.
	KeyActive KeyState = "active"
	// KeyVerifying: superseded by a newer key; it verifies the tokens it
	// signed until VerifiesUntil.
	KeyVerifying KeyState = "verifying"
	// KeyRetired: tokens it signed are refused (capability.invalid).
	KeyRetired KeyState = "retired"
)

// KeyStatus is a key and its state at a given time, with the dates that
// make it.
type KeyStatus struct {
	Key
	State KeyState
	// StoppedSigning is when the next key activated (zero: it still signs,
	// or never signed).
	StoppedSigning time.Time
	// RetiresAt is when it is, or will be, retired: by an operator, or at
	// the end of its verification window. Zero: not scheduled (it signs).
	RetiresAt time.Time
}

// Ring is an immutable set of signing keys and the rule of their lives.
// Safe for concurrent use.
type Ring struct {
	keys      []Key // by (Activates, ID)
	retention time.Duration
	source    string
}

// NewRing returns a ring of keys (at most MaxRingKeys, distinct ids) whose
// keys verify for retention after they stop signing (0: DefaultRetention).
// source names where the keys came from, for errors.
func NewRing(keys []Key, retention time.Duration, source string) (*Ring, error) {
	if retention == 0 {
		retention = DefaultRetention
	}
	if retention < 0 {
		return nil, fmt.Errorf("captoken: ring %s: negative retention %s", source, retention)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("ring %s holds no key: make one with 'opledger keys new'", source)
	}
	if len(keys) > MaxRingKeys {
		return nil, fmt.Errorf("ring %s holds %d keys, at most %d: retire and remove old ones", source, len(keys), MaxRingKeys)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.ID] {
			return nil, fmt.Errorf("ring %s holds key %s twice", source, k.ID)
		}
		seen[k.ID] = true
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, func(a, b Key) int {
		return cmp.Or(a.Activates.Compare(b.Activates), cmp.Compare(a.ID, b.ID))
	})
	return &Ring{keys: sorted, retention: retention, source: source}, nil
}

// SingleKeyRing is the ring of one key that always signs: what the
// single-key file (--signing-key) and --dev's ephemeral key are.
func SingleKeyRing(s *Signer, source string) *Ring {
	return &Ring{keys: []Key{{ID: s.KeyID(), signer: s}}, retention: DefaultRetention, source: source}
}

// Source names where the ring's keys came from.
func (r *Ring) Source() string { return r.source }

// Retention is how long a key verifies after it stopped signing.
func (r *Ring) Retention() time.Duration { return r.retention }

// Status returns every key with its state at now, oldest activation first.
func (r *Ring) Status(now time.Time) []KeyStatus {
	out := make([]KeyStatus, 0, len(r.keys))
	var next time.Time // Activates of the next key that signed, walking back
	for i := len(r.keys) - 1; i >= 0; i-- {
		k := r.keys[i]
		st := KeyStatus{Key: k}
		if k.signedAtAll() {
			st.StoppedSigning = next
			next = k.Activates
		}
		out = append(out, st.at(now, r.retention))
	}
	slices.Reverse(out)
	return out
}

// at fills in the state at now. StoppedSigning holds the next key's
// activation (zero if none) on the way in; it is kept only once passed.
func (st KeyStatus) at(now time.Time, retention time.Duration) KeyStatus {
	stops := st.StoppedSigning
	st.StoppedSigning = time.Time{}
	if !st.signedAtAll() {
		st.RetiresAt = st.Retired
		st.State = KeyPending
		if !now.Before(st.Retired) {
			st.State = KeyRetired
		}
		return st
	}
	if !stops.IsZero() {
		st.RetiresAt = stops.Add(retention)
	}
	if !st.Retired.IsZero() && (st.RetiresAt.IsZero() || st.Retired.Before(st.RetiresAt)) {
		st.RetiresAt = st.Retired
	}
	switch {
	case !st.RetiresAt.IsZero() && !now.Before(st.RetiresAt):
		st.State = KeyRetired
	case now.Before(st.Activates):
		st.State = KeyPending
	case stops.IsZero() || now.Before(stops):
		st.State = KeyActive
	default:
		st.State = KeyVerifying
	}
	if !stops.IsZero() && !now.Before(stops) {
		st.StoppedSigning = stops
	}
	return st
}

// ErrNoActiveKey means no key of the ring may sign now (every key retired,
// or the only ones pending).
var ErrNoActiveKey = errors.New("no active signing key")

// Active returns the key that signs at now.
func (r *Ring) Active(now time.Time) (KeyStatus, error) {
	for _, st := range r.Status(now) {
		if st.State == KeyActive {
			if st.signer == nil {
				return KeyStatus{}, fmt.Errorf("ring %s: active key %s has no seed", r.source, st.ID)
			}
			return st, nil
		}
	}
	return KeyStatus{}, fmt.Errorf("ring %s: %w at %s: make one with 'opledger keys new'", r.source, ErrNoActiveKey, now.UTC().Format(time.RFC3339))
}

// Sign signs c with the key active at now.
func (r *Ring) Sign(now time.Time, c Claims) (string, error) {
	st, err := r.Active(now)
	if err != nil {
		return "", fmt.Errorf("captoken: sign: %w", err)
	}
	return st.signer.Sign(c)
}

// Verify checks token as Verifier.Verify does, with the key it names
// (version 2) or every key that verifies at now (version 1, no kid). A
// token of a retired key fails with ErrRetiredKey, of a key the ring does
// not hold with ErrUnknownKey; both wrap ErrBadSignature.
func (r *Ring) Verify(now time.Time, token string) (Claims, error) {
	payload, sig, err := split(token)
	if err != nil {
		return Claims{}, err
	}
	statuses := r.Status(now)
	if kid := peekKeyID(payload); kid != "" {
		i := slices.IndexFunc(statuses, func(st KeyStatus) bool { return st.ID == kid })
		switch {
		case i < 0:
			return Claims{}, ErrUnknownKey
		case statuses[i].State == KeyRetired:
			return Claims{}, fmt.Errorf("%w %s (retired %s)", ErrRetiredKey, kid, statuses[i].RetiresAt.UTC().Format(time.RFC3339))
		case statuses[i].signer == nil:
			return Claims{}, fmt.Errorf("%w %s (its seed is not in the ring)", ErrRetiredKey, kid)
		}
		return statuses[i].signer.check(payload, sig)
	}
	for _, st := range statuses { // a version 1 token: the key is not named
		if st.State == KeyRetired || st.signer == nil {
			continue
		}
		if ed25519.Verify(st.signer.pub, signedMessage(payload), sig) {
			return st.signer.check(payload, sig)
		}
	}
	return Claims{}, ErrBadSignature
}
