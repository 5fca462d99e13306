package audit_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain/audit"
	"opledger/eventstore"
)

// proofRoundTrip writes a proof and parses it back, as the file handed to a
// third party is.
func proofRoundTrip(t *testing.T, p *audit.Proof) *audit.Proof {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, p.WriteJSON(&b))
	back, err := audit.ParseProof(&b)
	require.NoError(t, err)
	return back
}

// TestProofChecksOffline: a proof of OP-4471's history checks with nothing
// but the digest and its public key, on every backend.
func TestProofChecksOffline(t *testing.T) {
	onEveryInsider(t, func(t *testing.T, in *insider) {
		n := newStory(t, in.store).write()
		waitVisible(t, in.store, n)
		d := digestOf(t, in.store)
		p, err := audit.Prove(context.Background(), in.store, opThursday, d)
		require.NoError(t, err)
		p = proofRoundTrip(t, p)
		require.Equal(t, streamLength(t, in.store, thursday), int64(len(p.Events)))

		res, err := audit.CheckProof(p, d, digestSigner.DigestVerifier)
		require.NoError(t, err)
		require.True(t, res.OK, "%v", res.Problems)
		for _, e := range res.Events {
			require.True(t, e.Included && e.Linked, "%+v", e)
		}
		var text bytes.Buffer
		require.NoError(t, res.WriteText(&text))
		require.Contains(t, text.String(), "audit check-proof: OK")
	})
}

// TestProofFailsWhenAltered: a proof whose events were edited, dropped or
// reordered, or whose paths were, fails; so does one against another digest
// or checked with another key.
func TestProofFailsWhenAltered(t *testing.T) {
	store := newMemoryStore()
	n := newStory(t, store).write()
	d := digestOf(t, store)
	good, err := audit.Prove(context.Background(), store, opThursday, d)
	require.NoError(t, err)
	fresh := func() *audit.Proof { return proofRoundTrip(t, good) }

	check := func(p *audit.Proof) audit.ProofCheck {
		t.Helper()
		res, err := audit.CheckProof(p, d, digestSigner.DigestVerifier)
		require.NoError(t, err)
		return res
	}

	amount := fresh()
	amount.Events[0].Data = setField(t, amount.Events[0].Data, "amount_minor", "20000")
	res := check(amount)
	require.False(t, res.OK)
	require.False(t, res.Events[0].Linked, "its hash is no longer its content's")
	require.Contains(t, res.Problems[0], "changed")

	rehashed := fresh() // the forger also fixes the event's hash: the path no longer leads to the root
	rehashed.Events[0].Data = amount.Events[0].Data
	rows := []row{{RecordedEvent: proofEvent(rehashed, 0)}}
	rehash(t, rows, thursday, 0)
	rehashed.Events[0].Hash = hexOf(rows[0].Hash)
	res = check(rehashed)
	require.False(t, res.OK)
	require.True(t, res.Events[0].Linked)
	require.False(t, res.Events[0].Included)

	dropped := fresh()
	dropped.Events = slices.Delete(dropped.Events, 2, 3)
	require.False(t, check(dropped).OK, "a missing event breaks the versions and the link")

	path := fresh()
	path.Events[1].Inclusion[0] = path.Events[2].Inclusion[0]
	res = check(path)
	require.False(t, res.OK)
	require.False(t, res.Events[1].Included)

	swapped := fresh()
	swapped.Events[1], swapped.Events[2] = swapped.Events[2], swapped.Events[1]
	require.False(t, check(swapped).OK)

	h := newHistory(t, store, "OP-6001")
	h.start() // more events after the first digest
	later := digestOf(t, store)
	res, err = audit.CheckProof(fresh(), later, digestSigner.DigestVerifier)
	require.NoError(t, err)
	require.False(t, res.OK, "a proof is against one digest")
	require.Contains(t, res.Problems[0], "the proof is against the digest of")

	_, err = audit.CheckProof(fresh(), d, otherSigner.DigestVerifier)
	require.ErrorIs(t, err, audit.ErrBadSignature)

	var b bytes.Buffer
	require.NoError(t, fresh().WriteJSON(&b))
	_, err = audit.ParseProof(bytes.NewReader(bytes.Replace(b.Bytes(), []byte(`"format"`), []byte(`"extra": 1, "format"`), 1)))
	require.Error(t, err, "unknown members are refused")
	require.Equal(t, uint64(n), d.TreeSize)
}

// TestProveRefusesADepartedLog: no proof is made from a log that no longer
// matches the digest.
func TestProveRefusesADepartedLog(t *testing.T) {
	in := openMemoryInsider(t)
	newStory(t, in.store).write()
	d := digestOf(t, in.store)
	in.rows(t, true, func(rows []row) []row {
		rows[5].Data = setField(t, rows[5].Data, "approver", `"mallory"`)
		rehash(t, rows, rows[5].StreamID, rows[5].Version)
		return rows
	})
	_, err := audit.Prove(context.Background(), in.store, opThursday, d)
	require.ErrorIs(t, err, audit.ErrLogDeparts)
	_, err = audit.Prove(context.Background(), in.store, "OP-9999", digestOf(t, in.store))
	require.ErrorContains(t, err, "no event of operation-OP-9999")
}

func proofEvent(p *audit.Proof, i int) (e eventstore.RecordedEvent) {
	pe := p.Events[i]
	e.StreamID, e.Version, e.ID, e.Type, e.Data, e.Metadata = p.Stream, pe.Version, pe.EventID, pe.Type, pe.Data, pe.Metadata
	return e
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
