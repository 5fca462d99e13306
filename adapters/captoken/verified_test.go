package captoken

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVerifiedSignaturesRememberOnlyWhatVerified: a signature that
// verified is remembered and verifies again; the same payload with any
// other signature, or another payload with it, is still checked and
// refused; a refused signature is not remembered.
func TestVerifiedSignaturesRememberOnlyWhatVerified(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	payload := []byte(`{"v":2,"cap":"CAP-1"}`)
	sig := ed25519.Sign(priv, signedMessage(payload))
	var m verifiedSignatures

	require.True(t, m.verify(pub, payload, sig))
	require.Equal(t, 1, m.size())
	require.True(t, m.verify(pub, payload, sig), "verified again, from memory")
	require.Equal(t, 1, m.size())

	flipped := bytes.Clone(sig)
	flipped[0] ^= 1
	require.False(t, m.verify(pub, payload, flipped), "another signature of the same payload")
	require.False(t, m.verify(pub, []byte(`{"v":2,"cap":"CAP-2"}`), sig), "the signature on another payload")
	require.False(t, m.verify(pub, payload, sig[:63]), "a short signature")
	require.Equal(t, 1, m.size(), "refusals are not remembered")
}

// TestVerifiedSignaturesBounded: however many signatures verify, at most
// two generations are remembered.
func TestVerifiedSignaturesBounded(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	var m verifiedSignatures
	for i := range 2*verifiedPerGeneration + 10 {
		payload := binary.BigEndian.AppendUint32(nil, uint32(i))
		require.True(t, m.verify(pub, payload, ed25519.Sign(priv, signedMessage(payload))))
		require.LessOrEqual(t, m.size(), 2*verifiedPerGeneration)
	}
	require.Greater(t, m.size(), verifiedPerGeneration, "the newest generation and the one before")
}
