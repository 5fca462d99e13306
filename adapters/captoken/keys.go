package captoken

import (
	"fmt"
	"sync/atomic"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
)

// Keys is the ring a serving process signs and verifies with: the ring
// judged at its clock's now, swapped atomically by Reload, so requests in
// flight keep the ring they started with and none is refused for the
// swap. Safe for concurrent use.
type Keys struct {
	clock  clock.Clock
	reload func() (*Ring, error) // nil: the ring cannot be reloaded
	ring   atomic.Pointer[Ring]
}

// NewKeys returns a Keys holding ring, judged at clk (default the system
// clock). reload, when not nil, is what Reload reads.
func NewKeys(ring *Ring, clk clock.Clock, reload func() (*Ring, error)) *Keys {
	if clk == nil {
		clk = clock.System{}
	}
	k := &Keys{clock: clk, reload: reload}
	k.ring.Store(ring)
	return k
}

// OpenKeys loads the ring at path (a directory or a file, see ReadRing)
// and refuses it unless a key signs now. Reload reads path again.
func OpenKeys(path string, retention time.Duration, clk clock.Clock) (*Keys, error) {
	load := func() (*Ring, error) { return LoadRing(path, retention) }
	ring, err := load()
	if err != nil {
		return nil, err
	}
	k := NewKeys(ring, clk, load)
	if _, err := ring.Active(k.clock.Now()); err != nil {
		return nil, err
	}
	return k, nil
}

// OpenSingleKey is the one-key ring of a single-key file (see LoadSigner):
// its key always signs. Reload reads the file again, so replacing the file
// and reloading replaces the key (and outstanding tokens stop verifying:
// rotate with a ring instead).
func OpenSingleKey(path string, clk clock.Clock) (*Keys, error) {
	load := func() (*Ring, error) {
		s, err := LoadSigner(path)
		if err != nil {
			return nil, err
		}
		return SingleKeyRing(s, path), nil
	}
	ring, err := load()
	if err != nil {
		return nil, err
	}
	return NewKeys(ring, clk, load), nil
}

// Reload reads the ring again and swaps it in when a key of it signs now;
// on any error the ring in use stays.
func (k *Keys) Reload() error {
	if k.reload == nil {
		return fmt.Errorf("captoken: this key ring cannot be reloaded")
	}
	ring, err := k.reload()
	if err != nil {
		return err
	}
	if _, err := ring.Active(k.clock.Now()); err != nil {
		return err
	}
	k.ring.Store(ring)
	return nil
}

// Ring returns the ring in use.
func (k *Keys) Ring() *Ring { return k.ring.Load() }

// Sign signs c with the key active now.
func (k *Keys) Sign(c Claims) (string, error) { return k.ring.Load().Sign(k.clock.Now(), c) }

// TokenFor returns the token of a capability issued on operation op.
func (k *Keys) TokenFor(op domain.OperationID, ev domain.CapabilityIssued) (string, error) {
	return k.Sign(ClaimsFor(op, ev))
}

// Verify checks token against the ring at now (see Ring.Verify).
func (k *Keys) Verify(token string) (Claims, error) {
	return k.ring.Load().Verify(k.clock.Now(), token)
}

// KeyID names the key active now ("" when none is).
func (k *Keys) KeyID() string {
	st, err := k.ring.Load().Active(k.clock.Now())
	if err != nil {
		return ""
	}
	return st.ID
}

// Status lists the ring's keys with their states now.
func (k *Keys) Status() []KeyStatus { return k.ring.Load().Status(k.clock.Now()) }
