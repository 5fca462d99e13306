package audit

import (
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"opledger/eventstore/chain"
)

// The digests' Merkle tree is RFC 6962's (Certificate Transparency's), from
// github.com/transparency-dev/merkle: leaves are the events of the global
// log in its order, each leaf's data the event's chain hash as recomputed
// from what the store returns (chain.Recompute), so the tree commits to
// every event's content, its link to its predecessor, and the order of the
// whole log. It is built by appending leaves to a compact range: O(log n)
// hashes, whatever the log's size.

// treeHasher is RFC 6962's SHA-256 tree hasher: leaf = SHA-256(0x00 || data),
// node = SHA-256(0x01 || left || right).
var treeHasher = rfc6962.DefaultHasher

var ranges = &compact.RangeFactory{Hash: treeHasher.HashChildren}

// leafHash is the Merkle leaf of an event with chain hash h.
func leafHash(h chain.Hash) []byte { return treeHasher.HashLeaf(h[:]) }

// maxBlocks bounds the block roots a digest carries (see logTree).
const maxBlocks = 1024

// logTree is the Merkle tree of the log as it is read. Besides the root, it
// keeps the roots of its aligned blocks of 2^blockLevel leaves, the smallest
// such blocks that number at most maxBlocks: a digest carries them so that
// a verifier can say in which block the log first departs from it. When the
// blocks outgrow the bound, pairs are merged and the level rises. It can
// also capture chosen nodes as they are computed (for proofs).
type logTree struct {
	r          *compact.Range
	blockLevel uint
	blocks     [][]byte
	// want holds the nodes to capture; captured ones get their hash.
	want map[compact.NodeID][]byte
}

func newLogTree() *logTree {
	return &logTree{r: ranges.NewEmptyRange(0), want: map[compact.NodeID][]byte{}}
}

// size is the number of leaves.
func (t *logTree) size() uint64 { return t.r.End() }

// append adds the leaf of an event with chain hash h.
func (t *logTree) append(h chain.Hash) {
	// Append fails only for a corrupted range, which this one never is.
	if err := t.r.Append(leafHash(h), t.visit); err != nil {
		panic(fmt.Sprintf("audit: merkle append: %v", err))
	}
}

// visit captures the nodes wanted and the block roots.
func (t *logTree) visit(id compact.NodeID, hash []byte) {
	if _, ok := t.want[id]; ok {
		t.want[id] = hash
	}
	if id.Level != t.blockLevel {
		return
	}
	if id.Index != uint64(len(t.blocks)) {
		return // a block that a merge left unpaired; its parent is captured at the next level
	}
	t.blocks = append(t.blocks, hash)
	if len(t.blocks) > maxBlocks {
		merged := make([][]byte, len(t.blocks)/2)
		for i := range merged {
			merged[i] = treeHasher.HashChildren(t.blocks[2*i], t.blocks[2*i+1])
		}
		t.blocks, t.blockLevel = merged, t.blockLevel+1
	}
}

// root is the tree's root hash (the empty tree's: SHA-256 of nothing).
func (t *logTree) root() []byte {
	if t.size() == 0 {
		return treeHasher.EmptyRoot()
	}
	h, err := t.r.GetRootHash(nil)
	if err != nil {
		panic(fmt.Sprintf("audit: merkle root: %v", err))
	}
	return h
}

// tail returns the hashes of the compact range's nodes below the block
// level: the part of the tree after the last full block.
func (t *logTree) tail() [][]byte {
	ids := compact.RangeNodes(0, t.size(), nil)
	var out [][]byte
	for i, id := range ids {
		if id.Level < t.blockLevel {
			out = append(out, t.r.Hashes()[i])
		}
	}
	return out
}

// nodesBefore maps the nodes of the compact range [0, size) to their
// hashes: the completed subtrees left of the next leaf.
func (t *logTree) nodesBefore() map[compact.NodeID][]byte {
	ids := compact.RangeNodes(0, t.size(), nil)
	out := make(map[compact.NodeID][]byte, len(ids))
	for i, id := range ids {
		out[id] = t.r.Hashes()[i]
	}
	return out
}

// rootFromBlocks recomputes a tree's root from its block roots at level
// and the tail's node hashes: what a verifier does to trust a digest's
// blocks before using them.
func rootFromBlocks(size uint64, level uint, blocks, tail [][]byte) ([]byte, error) {
	if level > 63 {
		return nil, fmt.Errorf("block level %d out of range", level)
	}
	full := size >> level
	if uint64(len(blocks)) != full {
		return nil, fmt.Errorf("%d block roots for %d leaves at level %d, want %d", len(blocks), size, level, full)
	}
	r := ranges.NewEmptyRange(0)
	for j, b := range blocks {
		br, err := ranges.NewRange(uint64(j)<<level, uint64(j+1)<<level, [][]byte{b})
		if err != nil {
			return nil, err
		}
		if err := r.AppendRange(br, nil); err != nil {
			return nil, err
		}
	}
	if want := compact.RangeSize(full<<level, size); len(tail) != want {
		return nil, fmt.Errorf("%d tail hashes, want %d", len(tail), want)
	}
	tr, err := ranges.NewRange(full<<level, size, tail)
	if err != nil {
		return nil, err
	}
	if err := r.AppendRange(tr, nil); err != nil {
		return nil, err
	}
	if size == 0 {
		return treeHasher.EmptyRoot(), nil
	}
	return r.GetRootHash(nil)
}
