package httpapi_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/domain"
)

// TestClaimsAcrossAKeyRotation: over HTTP, a capability issued under key A
// still claims after the ring rotated to B; once A is retired (its window
// over, or by an operator) a capability it signed is refused
// capability.invalid and recorded, although the capability itself is
// unexpired and unused.
func TestClaimsAcrossAKeyRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var keys *captoken.Keys
	write := func(ks ...captoken.Key) {
		for _, k := range ks {
			require.NoError(t, captoken.WriteKeyFile(filepath.Join(dir, k.ID+captoken.KeyFileSuffix), "", []captoken.Key{k}))
		}
	}
	e := newEnv(t, func(c *httpapi.Config) {
		a, err := captoken.NewKey(c.Ledger.Clock().Now(), c.Ledger.Clock().Now())
		require.NoError(t, err)
		write(a)
		// A short retention so that A's window ends while capabilities
		// (15 minutes) are still alive.
		keys, err = captoken.OpenKeys(dir, 5*time.Minute, c.Ledger.Clock())
		require.NoError(t, err)
		c.Signer = keys
	})
	keyA := keys.KeyID()
	op1, op2 := e.create("rot-1"), e.create("rot-2")
	_, tok1 := e.allow(op1)
	_, tok2 := e.allow(op2)

	b, err := captoken.NewKey(e.clock.Now(), e.clock.Now().Add(time.Second))
	require.NoError(t, err)
	write(b)
	require.NoError(t, keys.Reload())
	e.clock.Advance(time.Second)
	require.Equal(t, b.ID, keys.KeyID())
	op4 := e.create("rot-4")
	_, tok4 := e.allow(op4)
	c4, err := captoken.ParseUnverified(tok4)
	require.NoError(t, err)
	require.Equal(t, b.ID, c4.KeyID, "new capabilities are signed by B")

	r := e.must(http.StatusOK, e.claim(op1, "MSG-rot-1", tok1))
	require.Equal(t, "Claimed", r.str("status"), "A's capability claims after the rotation: %s", r.raw)
	r = e.must(http.StatusOK, e.claim(op4, "MSG-rot-4", tok4))
	require.Equal(t, "Claimed", r.str("status"))

	// A's window ends (5 minutes after B activated); op2's capability is
	// 5 minutes old of its 15.
	e.clock.Advance(5 * time.Minute)
	r = e.must(http.StatusOK, e.claim(op2, "MSG-rot-2", tok2))
	require.Equal(t, "Invalid", r.str("status"))
	require.Equal(t, string(domain.ReasonCapabilityInvalid), r.str("reason"))
	require.Equal(t, false, r.body["execution_attempted"])
	require.Contains(t, e.streamTypes(e.unattributed()), "PresentationRejected", "the refusal is evidence")
	for _, st := range keys.Status() {
		if st.ID == keyA {
			require.Equal(t, captoken.KeyRetired, st.State)
		}
	}

	// An operator retiring a key has the same effect at once: a ring
	// whose file retires B and adds C refuses B's token.
	c, err := captoken.NewKey(e.clock.Now(), e.clock.Now())
	require.NoError(t, err)
	op5 := e.create("rot-5")
	_, tok5 := e.allow(op5) // signed by B
	write(c, b.Retire(e.clock.Now()))
	require.NoError(t, keys.Reload())
	r = e.must(http.StatusOK, e.claim(op5, "MSG-rot-5", tok5))
	require.Equal(t, "Invalid", r.str("status"))
}
