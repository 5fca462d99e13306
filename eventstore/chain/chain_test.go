package chain_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/chain"
)

const (
	stream  = "operation-OP-4471"
	eventID = "0193a5c2-7b1e-7000-8000-000000000001"
)

// The definition, written out by hand: a change to it (or to Genesis)
// fails here, and would leave every stored hash unverifiable.
func TestDefinitionByHand(t *testing.T) {
	require.Equal(t, "979dded55cf983da78ddca07ec30cd5d23f624483742816c31e68e8744fe2247", chain.Genesis.String())

	data := []byte(`{"operation_id": "OP-4471", "amount_minor": 12000}`)
	meta := []byte(`{"schema_version":1}`)
	canonical := `{"data":{"amount_minor":12000,"operation_id":"OP-4471"},"event_id":"` + eventID +
		`","metadata":{"schema_version":1},"stream":"operation-OP-4471","type":"OperationRequested"}`
	wantContent := sha256.Sum256([]byte(canonical))
	content, err := chain.Content(stream, eventID, "OperationRequested", data, meta)
	require.NoError(t, err)
	require.Equal(t, chain.Hash(wantContent), content)

	input := append([]byte("opledger/event/v1"), chain.Genesis[:]...)
	input = binary.BigEndian.AppendUint64(input, 0)
	input = append(input, content[:]...)
	require.Equal(t, chain.Hash(sha256.Sum256(input)), chain.Link(chain.Genesis, 0, content))
}

func TestContentIsOverTheCanonicalForm(t *testing.T) {
	a, err := chain.Content(stream, eventID, "T", []byte(`{"b":1.50,"a":[true]}`), nil)
	require.NoError(t, err)
	b, err := chain.Content(stream, eventID, "T", []byte("{ \"a\" : [ true ], \"b\" : 15e-1 }"), []byte{})
	require.NoError(t, err)
	require.Equal(t, a, b, "whitespace, order, number spelling and empty-vs-nil metadata do not matter")

	for name, other := range map[string]func() (chain.Hash, error){
		"data value": func() (chain.Hash, error) {
			return chain.Content(stream, eventID, "T", []byte(`{"b":1.51,"a":[true]}`), nil)
		},
		"stream": func() (chain.Hash, error) {
			return chain.Content("operation-OP-4472", eventID, "T", []byte(`{"b":1.5,"a":[true]}`), nil)
		},
		"id": func() (chain.Hash, error) {
			return chain.Content(stream, eventID[:35]+"2", "T", []byte(`{"b":1.5,"a":[true]}`), nil)
		},
		"type": func() (chain.Hash, error) {
			return chain.Content(stream, eventID, "U", []byte(`{"b":1.5,"a":[true]}`), nil)
		},
		"metadata": func() (chain.Hash, error) {
			return chain.Content(stream, eventID, "T", []byte(`{"b":1.5,"a":[true]}`), []byte(`{}`))
		},
		"null data":   func() (chain.Hash, error) { return chain.Content(stream, eventID, "T", []byte(`null`), nil) },
		"absent data": func() (chain.Hash, error) { return chain.Content(stream, eventID, "T", nil, nil) },
	} {
		h, err := other()
		require.NoError(t, err, name)
		require.NotEqual(t, a, h, name)
	}
	null, _ := chain.Content(stream, eventID, "T", []byte(`null`), nil)
	absent, _ := chain.Content(stream, eventID, "T", nil, nil)
	require.NotEqual(t, null, absent, "JSON null data is not absent data")

	_, err = chain.Content(stream, eventID, "T", []byte(`{"a":1,"a":2}`), nil)
	require.ErrorIs(t, err, chain.ErrNotCanonicalizable)
	require.ErrorContains(t, err, "data:")
	_, err = chain.Content(stream, eventID, "T", nil, []byte(`not json`))
	require.ErrorContains(t, err, "metadata:")
}

func TestLinksChain(t *testing.T) {
	c1, _ := chain.Content(stream, eventID, "A", nil, nil)
	c2, _ := chain.Content(stream, eventID, "B", nil, nil)
	got := chain.Links(chain.Genesis, 0, []chain.Hash{c1, c2})
	h0 := chain.Link(chain.Genesis, 0, c1)
	require.Equal(t, []chain.Hash{h0, chain.Link(h0, 1, c2)}, got)
	require.NotEqual(t, chain.Link(chain.Genesis, 1, c1), h0, "the version is covered")
	require.NotEqual(t, chain.Link(h0, 0, c1), h0, "the predecessor is covered")
}

func TestRecompute(t *testing.T) {
	data := []byte(`{"n":1}`)
	c, err := chain.Content(stream, eventID, "A", data, nil)
	require.NoError(t, err)
	h := chain.Link(chain.Genesis, 0, c)

	r, err := chain.Recompute(stream, eventID, "A", 0, data, nil, chain.Genesis[:], h[:])
	require.NoError(t, err)
	require.True(t, r.Matches())

	r, err = chain.Recompute(stream, eventID, "A", 0, []byte(`{"n":2}`), nil, chain.Genesis[:], h[:])
	require.NoError(t, err)
	require.False(t, r.Matches(), "changed data")
	require.Equal(t, h, r.Stored)

	r, err = chain.Recompute(stream, eventID, "A", 0, data, nil, nil, nil)
	require.NoError(t, err)
	require.False(t, r.Hashed)
	require.False(t, r.Matches(), "an unhashed event never matches")
	require.Equal(t, h, r.Hash, "an unhashed event is recomputed as if it linked to Genesis")

	_, err = chain.Recompute(stream, eventID, "A", 0, data, nil, nil, []byte{1, 2})
	require.ErrorContains(t, err, "2 bytes")
}

func TestParseHash(t *testing.T) {
	h, err := chain.ParseHash(chain.Genesis.String())
	require.NoError(t, err)
	require.Equal(t, chain.Genesis, h)
	_, err = chain.ParseHash("abc")
	require.Error(t, err)
	_, err = chain.ParseHash(string(make([]byte, 64)))
	require.Error(t, err)
}
