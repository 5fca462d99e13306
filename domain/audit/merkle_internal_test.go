package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/transparency-dev/merkle/proof"

	"opledger/eventstore/chain"
)

// naiveRoot is RFC 6962 section 2.1's MTH, written from the RFC.
func naiveRoot(leaves [][]byte) []byte {
	switch len(leaves) {
	case 0:
		s := sha256.Sum256(nil)
		return s[:]
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(naiveRoot(leaves[:k]))
	h.Write(naiveRoot(leaves[k:]))
	return h.Sum(nil)
}

func testHash(i int) chain.Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return chain.Hash(sha256.Sum256(b[:]))
}

// TestLogTreeIsRFC6962 checks the tree, its blocks and the roots rebuilt
// from them against the RFC's definition, across block-level rises.
func TestLogTreeIsRFC6962(t *testing.T) {
	tree := newLogTree()
	var leaves [][]byte
	sizes := map[int]bool{0: true, 1: true, 2: true, 3: true, 7: true, 8: true, 1023: true, 1024: true, 1025: true, 1026: true, 2049: true, 4100: true}
	for i := 0; i <= 4100; i++ {
		if sizes[i] {
			require.Equal(t, naiveRoot(leaves), tree.root(), "root at %d", i)
			require.LessOrEqual(t, len(tree.blocks), maxBlocks)
			require.Equal(t, uint64(i)>>tree.blockLevel, uint64(len(tree.blocks)), "full blocks at %d", i)
			for j, b := range tree.blocks {
				size := 1 << tree.blockLevel
				require.Equal(t, naiveRoot(leaves[j*size:(j+1)*size]), b, "block %d at %d", j, i)
			}
			root, err := rootFromBlocks(tree.size(), tree.blockLevel, tree.blocks, tree.tail())
			require.NoError(t, err)
			require.Equal(t, tree.root(), root, "rebuilt at %d", i)
		}
		h := testHash(i)
		leaves = append(leaves, leafHash(h))
		tree.append(h)
	}
	_, err := rootFromBlocks(tree.size(), tree.blockLevel, tree.blocks[1:], tree.tail())
	require.Error(t, err, "a block missing")
}

// TestNodesBeforeGiveInclusionPaths: the compact range before a leaf holds
// the left half of its inclusion path.
func TestNodesBeforeGiveInclusionPaths(t *testing.T) {
	const size = 37
	tree := newLogTree()
	var pending []*pendingProof
	for i := range size {
		if i%5 == 0 {
			pp, err := newPending(tree, size, ProvedEvent{Index: uint64(i)})
			require.NoError(t, err)
			pending = append(pending, pp)
		}
		tree.append(testHash(i))
	}
	for _, pp := range pending {
		for k, id := range pp.nodes.IDs {
			if pp.hashes[k] == nil {
				pp.hashes[k] = tree.want[id]
			}
		}
		path, err := pp.nodes.Rehash(pp.hashes, treeHasher.HashChildren)
		require.NoError(t, err)
		require.NoError(t, proof.VerifyInclusion(treeHasher, pp.event.Index, size, leafHash(testHash(int(pp.event.Index))), path, tree.root()))
	}
}
