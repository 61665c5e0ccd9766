package sim

import (
	"container/heap"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refCache is the first prefix cache (a node per token with child pointers), kept as the
// reference the index-based one must agree with, evictions included.
type refCache struct {
	root     refNode
	size     int
	capacity int
	clock    uint64
}

type refNode struct {
	id       uint32
	parent   *refNode
	children []*refNode
	used     uint64
}

func (n *refNode) child(id uint32) *refNode {
	for _, c := range n.children {
		if c.id == id {
			return c
		}
	}
	return nil
}

func (c *refCache) match(ids []uint32) int {
	c.clock++
	n, k := &c.root, 0
	for _, id := range ids {
		next := n.child(id)
		if next == nil {
			break
		}
		next.used = c.clock
		n = next
		k++
	}
	return k
}

func (c *refCache) insert(ids []uint32) {
	c.clock++
	n := &c.root
	for _, id := range ids {
		next := n.child(id)
		if next == nil {
			next = &refNode{id: id, parent: n}
			n.children = append(n.children, next)
			c.size++
		}
		next.used = c.clock
		n = next
	}
	if c.size > c.capacity {
		c.evict(c.size - c.capacity*9/10)
	}
}

func (c *refCache) evict(k int) {
	var h refHeap
	var walk func(n *refNode)
	walk = func(n *refNode) {
		for _, ch := range n.children {
			if len(ch.children) == 0 {
				h = append(h, ch)
			} else {
				walk(ch)
			}
		}
	}
	walk(&c.root)
	heap.Init(&h)
	for k > 0 && h.Len() > 0 {
		l := heap.Pop(&h).(*refNode)
		p := l.parent
		for i, ch := range p.children {
			if ch == l {
				p.children = append(p.children[:i], p.children[i+1:]...)
				break
			}
		}
		c.size--
		k--
		if p != &c.root && len(p.children) == 0 {
			heap.Push(&h, p)
		}
	}
}

type refHeap []*refNode

func (h refHeap) Len() int           { return len(h) }
func (h refHeap) Less(i, j int) bool { return h[i].used < h[j].used }
func (h refHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refHeap) Push(x any)        { *h = append(*h, x.(*refNode)) }
func (h *refHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestPrefixCacheMatchesReference drives both caches with the same random traffic (shared
// prefixes, branches, repeats, flushes) at several capacities and compares every match.
func TestPrefixCacheMatchesReference(t *testing.T) {
	tests := []struct{ capacity, alphabet, maxNew, ops int }{
		{8, 6, 40, 3000}, {50, 6, 40, 3000}, {300, 6, 40, 3000}, {5000, 6, 40, 3000},
		{2000, 1000, 300, 1500}, {20000, 50, 300, 1500},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d-%d", tt.capacity, tt.alphabet, tt.maxNew), func(t *testing.T) {
			capacity := tt.capacity
			rng := rand.New(rand.NewSource(int64(capacity)))
			c, ref := newPrefixCache(capacity), &refCache{capacity: capacity}
			type pending struct {
				seq  []uint32
				mark cacheMark
			}
			var seen [][]uint32
			var waiting []pending // matched, inserted later (other requests run in between)
			for op := 0; op < tt.ops; op++ {
				var seq []uint32
				if len(seen) > 0 && rng.Intn(3) > 0 {
					old := seen[rng.Intn(len(seen))]
					seq = append(seq, old[:rng.Intn(len(old)+1)]...)
				}
				for n := rng.Intn(tt.maxNew); n > 0; n-- {
					seq = append(seq, uint32(rng.Intn(tt.alphabet)))
				}
				seen = append(seen, seq)
				k, mark := c.match(seq)
				require.Equal(t, ref.match(seq), k, "op %d", op)
				if rng.Intn(10) < 7 {
					waiting = append(waiting, pending{seq, mark})
				}
				switch r := rng.Intn(100); {
				case r == 0:
					c.flush()
					ref.root, ref.size = refNode{}, 0
				case r < 70 && len(waiting) > 0:
					i := rng.Intn(len(waiting))
					w := waiting[i]
					waiting = append(waiting[:i], waiting[i+1:]...)
					cut := rng.Intn(len(w.seq) + 1)
					if rng.Intn(4) == 0 {
						w.mark = noMark
					}
					c.insert(w.seq[:cut], w.seq[cut:], w.mark)
					ref.insert(w.seq)
				}
				require.Equal(t, ref.size, c.size, "op %d", op)
				if op%25 == 0 {
					checkLeaves(t, c)
					sameTrie(t, &ref.root, c, 0)
				}
			}
		})
	}
}

// checkLeaves verifies the leaf list against a walk of the trie.
func checkLeaves(t *testing.T, c *prefixCache) {
	t.Helper()
	want := map[int32]bool{}
	nodes := 0
	var walk func(n int32)
	walk = func(n int32) {
		for ch := c.node(n).first; ch != noNode; ch = c.node(ch).next {
			nodes++
			require.Equal(t, n, c.node(ch).parent)
			if c.node(ch).first == noNode {
				want[ch] = true
			}
			walk(ch)
		}
	}
	walk(0)
	require.Equal(t, c.size, nodes)
	got := map[int32]bool{}
	for i, id := range c.leaves {
		require.Equal(t, int32(i), c.node(id).leaf)
		got[id] = true
	}
	require.Equal(t, want, got)
}

// sameTrie compares the reference trie under r with the cache's under n: tokens, clocks
// and children, in order.
func sameTrie(t *testing.T, r *refNode, c *prefixCache, n int32) {
	t.Helper()
	i := 0
	for ch := c.node(n).first; ch != noNode; ch = c.node(ch).next {
		require.Less(t, i, len(r.children))
		rc, nd := r.children[i], c.node(ch)
		require.Equal(t, [2]uint64{uint64(rc.id), rc.used}, [2]uint64{uint64(nd.id), nd.used})
		sameTrie(t, rc, c, ch)
		i++
	}
	require.Equal(t, len(r.children), i)
}

// TestInsertOnPrefill: with insert_on_prefill a running sequence's prompt is already in the
// cache, so a request with the same prompt that starts while it runs reuses it; without it
// the prompt is stored only when the first sequence ends.
func TestInsertOnPrefill(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := startSim(t, Config{Cache: Cache{InsertOnPrefill: on}, Latency: Latency{PerToken: Duration(20 * time.Millisecond)}})
		prompt := chatPrompt(t, s, "Compute 8 * 9 + 6.")
		done := make(chan struct{})
		go func() {
			defer close(done)
			generate(t, s, prompt, map[string]any{"max_new_tokens": 100, "ignore_eos": true})
		}()
		for i := 0; s.Stats().PeakRunning == 0 && i < 20000; i++ {
			time.Sleep(time.Millisecond)
		}
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 1})
		want := 0.0
		if on {
			want = float64(len(prompt) - 1)
		}
		assert.Equal(t, want, obj(r["meta_info"])["cached_tokens"], "insert_on_prefill %t", on)
		<-done
	}
}
