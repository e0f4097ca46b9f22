package convert

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
)

// Order is how a plan lays its items (input × copy) out across shards.
type Order string

const (
	// OrderShuffle lays the items out in Copies rounds, round r holding
	// copy r of every input in a permutation drawn from the seed and r:
	// every shard is a uniform mix of classes, and the copies of an input
	// sit a round apart, so a loader reading shards sequentially gets
	// mixed batches and never two views of one input side by side.
	OrderShuffle Order = "shuffle"
	// OrderSorted keeps the inputs' sorted key order, copies adjacent.
	OrderSorted Order = "sorted"
)

// ParseOrder checks an --order value.
func ParseOrder(s string) (Order, error) {
	switch o := Order(s); o {
	case OrderShuffle, OrderSorted:
		return o, nil
	case "":
		return OrderShuffle, nil // the default
	}
	return "", fmt.Errorf("order %q: want shuffle or sorted", s)
}

// layout maps a plan position, the place an item takes in the shards, to
// the item: shard k holds positions [k·n, (k+1)·n).
type layout struct {
	order    Order
	inputs   int
	copies   int
	perShard int
	seed     uint64
	r        int     // shuffle: the round perm holds, -1 before the first
	perm     []int32 // round r's order of the inputs
}

func newLayout(order Order, inputs, copies, perShard int, seed uint64) *layout {
	return &layout{order: order, inputs: inputs, copies: copies, perShard: perShard, seed: seed, r: -1}
}

// item returns the input index and copy placed at position p.
func (l *layout) item(p int) (input, copy int) {
	if l.order != OrderShuffle {
		return p / l.copies, p % l.copies
	}
	r, j := p/l.inputs, p%l.inputs
	return int(l.round(r)[j]), r
}

// round returns round r's order of the inputs. Each round's depends on the
// one before (see separate), so they are made in turn; positions are asked
// for in increasing order, and only the latest round is kept: a task holds
// 4 bytes an input.
func (l *layout) round(r int) []int32 {
	if r < l.r {
		l.r, l.perm = -1, nil
	}
	for l.r < r {
		next := permutation(l.inputs, l.seed, l.r+1)
		if l.perm != nil {
			l.separate(l.perm, next, l.r+1)
		}
		l.r, l.perm = l.r+1, next
	}
	return l.perm
}

// separate keeps the copies of an input out of the one shard that may
// straddle the boundary between rounds r-1 and r: an input among the tail
// of prev in that shard is swapped out of next's head, with the first
// later input of next that is not in the tail. When a shard is longer than
// a round some input must appear twice in it, and nothing is done.
func (l *layout) separate(prev, next []int32, r int) {
	start := r * l.inputs // the boundary's position
	tail := start % l.perShard
	if tail == 0 || l.perShard > l.inputs {
		return
	}
	head := min(l.perShard-tail, l.inputs)
	inTail := make(map[int32]bool, tail)
	for _, e := range prev[l.inputs-tail:] {
		inTail[e] = true
	}
	k := head
	for i := range head {
		if !inTail[next[i]] {
			continue
		}
		for inTail[next[k]] { // tail+head <= inputs: k stays in range
			k++
		}
		next[i], next[k] = next[k], next[i]
		k++
	}
}

// permutation draws round r's permutation of 0..n-1 from seed with
// Fisher–Yates over a PCG generator and a bounded draw written out here
// (Lemire's multiply-and-reject), not rand.Shuffle: shards must not change
// with the Go release that built prep.
func permutation(n int, seed uint64, round int) []int32 {
	h := fnv.New128a()
	var b [24]byte
	copy(b[:], "order\x00\x00\x00")
	binary.LittleEndian.PutUint64(b[8:], seed)
	binary.LittleEndian.PutUint64(b[16:], uint64(round))
	h.Write(b[:])
	sum := h.Sum(nil)
	rng := rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:]))
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := bounded(rng, uint64(i+1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// bounded returns a uniform draw from [0, n).
func bounded(rng *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(rng.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(rng.Uint64(), n)
		}
	}
	return hi
}
