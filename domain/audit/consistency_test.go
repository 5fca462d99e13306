package audit_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain/audit"
)

// TestConsistencyCheckedWithoutTheLog: the proof a verify run found that a
// later digest extends an earlier one is checked from the two digests and
// the public key alone, after a round trip through its file; it fails for
// the digests of a rewritten log, for a proof about other digests, with
// any of its hashes changed, with the digests swapped and with another key.
func TestConsistencyCheckedWithoutTheLog(t *testing.T) {
	in := openMemoryInsider(t)
	n := newStory(t, in.store).write()
	first := digestOf(t, in.store)
	h := newHistory(t, in.store, "OP-6001")
	h.start()
	second := digestOf(t, in.store)
	require.Equal(t, uint64(n+h.next), second.TreeSize)

	rep := verifyWith(t, in.store, second, first)
	require.True(t, rep.OK())
	p, err := audit.NewConsistencyProof(first, second, rep.Digests[1])
	require.NoError(t, err)
	var file bytes.Buffer
	require.NoError(t, p.WriteJSON(&file))
	back, err := audit.ParseConsistencyProof(&file)
	require.NoError(t, err)
	require.Equal(t, p, back)
	key := digestSigner.DigestVerifier
	require.NoError(t, audit.CheckConsistency(back, first, second, key))

	changed := *back
	changed.Hashes = append([]string(nil), back.Hashes...)
	changed.Hashes[0] = strings.Repeat("0", 64)
	require.ErrorIs(t, audit.CheckConsistency(&changed, first, second, key), audit.ErrNotConsistent, "a hash changed")
	require.ErrorIs(t, audit.CheckConsistency(back, second, first, key), audit.ErrNotConsistent, "the digests swapped")
	require.ErrorIs(t, audit.CheckConsistency(back, first, second, otherSigner.DigestVerifier), audit.ErrBadSignature, "another key")
	require.ErrorIs(t, audit.CheckConsistency(back, first, first, key), audit.ErrNotConsistent, "a proof about other digests")

	// The insider rewrites history before a third digest: the verify run
	// proves no extension, so there is no proof to hand on, and the second
	// digest's proof does not fit the third.
	log := readLog(t, in.store)
	i := indexOf(t, log, thursday, 0)
	in.rows(t, true, func(rows []row) []row {
		rows[i].Data = setField(t, rows[i].Data, "amount_minor", "20000")
		rehash(t, rows, thursday, 0)
		return rows
	})
	third := digestOf(t, in.store)
	forged := verifyWith(t, in.store, third, first)
	_, err = audit.NewConsistencyProof(first, third, forged.Digests[1])
	require.ErrorIs(t, err, audit.ErrNotConsistent)
	require.ErrorIs(t, audit.CheckConsistency(back, first, third, key), audit.ErrNotConsistent)

	for _, bad := range []string{
		`{"format":"opledger-consistency/1","from_tree_size":1,"from_root":"","to_tree_size":2,"to_root":"","hashes":[],"extra":1}`,
		`{"format":"opledger-consistency/1","format":"x","from_tree_size":1,"from_root":"","to_tree_size":2,"to_root":"","hashes":[]}`,
		`{"format":"opledger-consistency/0","from_tree_size":1,"from_root":"","to_tree_size":2,"to_root":"","hashes":[]}`,
		`[]`,
	} {
		_, err := audit.ParseConsistencyProof(strings.NewReader(bad))
		require.ErrorIs(t, err, audit.ErrBadDigest, bad)
	}
}
