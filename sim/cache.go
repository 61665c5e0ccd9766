package sim

import "sync"

// prefixCache is a token trie standing in for SGLang's radix cache: match returns the
// longest stored prefix, insert stores a sequence, and past capacity the least recently
// used leaves are evicted. One node per token.
//
// The nodes live in pointer-free pages (children as a linked list of indices), so a cache
// of a million tokens costs the garbage collector nothing to scan (a node per token with
// child pointers made GC the largest cost of a busy server), and growing it never copies
// what is already there. The leaves are kept in a list, so eviction need not walk the
// whole trie to find them (that walk was a sixth of a busy server's time).
type prefixCache struct {
	mu       sync.Mutex
	pages    []*[cachePage]cacheNode
	n        int32   // nodes in use or freed; node 0 is the root
	free     []int32 // indices of evicted nodes, reused by insert
	leaves   []int32 // every childless node but the root, in no particular order
	size     int
	capacity int
	clock    uint64
	epoch    uint64 // counts evictions and flushes: marks from before are stale
}

// cacheNode is one token.
type cacheNode struct {
	used                            uint64
	id                              uint32
	parent, first, last, next, prev int32 // -1: none
	leaf                            int32 // position in leaves, -1: not a leaf
}

const (
	noNode    = -1
	pageShift = 12
	cachePage = 1 << pageShift
)

func (c *prefixCache) node(i int32) *cacheNode { return &c.pages[i>>pageShift][i&(cachePage-1)] }

func newPrefixCache(capacity int) *prefixCache {
	c := &prefixCache{capacity: capacity}
	c.reset()
	return c
}

func (c *prefixCache) reset() {
	c.epoch++
	c.pages, c.n = c.pages[:0], 0
	c.free, c.leaves = c.free[:0], c.leaves[:0]
	c.alloc(cacheNode{parent: noNode, first: noNode, last: noNode, next: noNode, prev: noNode, leaf: noNode})
	c.size = 0
}

func (c *prefixCache) child(n int32, id uint32) int32 {
	for ch := c.node(n).first; ch != noNode; ch = c.node(ch).next {
		if c.node(ch).id == id {
			return ch
		}
	}
	return noNode
}

// match is the length of the longest cached prefix of ids; it refreshes the matched path.
// The mark lets a later insert of the same ids start where the match ended.
func (c *prefixCache) match(ids []uint32) (int, cacheMark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	n := int32(0)
	k := 0
	for _, id := range ids {
		next := c.child(n, id)
		if next == noNode {
			break
		}
		c.node(next).used = c.clock
		n = next
		k++
	}
	return k, cacheMark{node: n, depth: k, epoch: c.epoch}
}

// cacheMark is where a match of some ids ended: the node holding ids[:depth]. It stays
// valid while nothing is evicted (epoch), as inserts only add nodes.
type cacheMark struct {
	node  int32
	depth int
	epoch uint64
}

// noMark makes insert walk from the root.
var noMark = cacheMark{node: noNode}

// insert stores the sequence a followed by b, then evicts down to capacity. m is the
// match of a (or a prefix of it), or noMark.
func (c *prefixCache) insert(a, b []uint32, m cacheMark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	n := int32(0)
	if m.node != noNode && m.epoch == c.epoch && m.depth <= len(a) {
		// the path to a[:depth] is still there: stamp it by parent links, no child search
		for x := m.node; x != 0; x = c.node(x).parent {
			c.node(x).used = c.clock
		}
		n, a = m.node, a[m.depth:]
	}
	n = c.walkInsert(n, a)
	c.walkInsert(n, b)
	if c.size > c.capacity {
		c.evict(c.size - c.capacity*9/10)
	}
}

func (c *prefixCache) walkInsert(n int32, ids []uint32) int32 {
	for _, id := range ids {
		next := c.child(n, id)
		if next == noNode {
			if n != 0 && c.node(n).first == noNode {
				c.dropLeaf(n)
			}
			next = c.alloc(cacheNode{id: id, parent: n, first: noNode, last: noNode, next: noNode, prev: c.node(n).last, leaf: noNode})
			c.addLeaf(next)
			if p := c.node(n); p.last == noNode {
				p.first, p.last = next, next
			} else {
				c.node(p.last).next = next
				p.last = next
			}
			c.size++
		}
		c.node(next).used = c.clock
		n = next
	}
	return n
}

func (c *prefixCache) alloc(nd cacheNode) int32 {
	if k := len(c.free); k > 0 {
		i := c.free[k-1]
		c.free = c.free[:k-1]
		*c.node(i) = nd
		return i
	}
	if int(c.n>>pageShift) == len(c.pages) {
		c.pages = append(c.pages, new([cachePage]cacheNode))
	}
	i := c.n
	c.n++
	*c.node(i) = nd
	return i
}

func (c *prefixCache) addLeaf(i int32) {
	c.node(i).leaf = int32(len(c.leaves))
	c.leaves = append(c.leaves, i)
}

func (c *prefixCache) dropLeaf(i int32) {
	nd := c.node(i)
	last := c.leaves[len(c.leaves)-1]
	c.leaves[nd.leaf] = last
	c.node(last).leaf = nd.leaf
	c.leaves = c.leaves[:len(c.leaves)-1]
	nd.leaf = noNode
}

// unlink removes leaf l from its parent's children; a parent left childless becomes a
// leaf.
func (c *prefixCache) unlink(l int32) {
	c.dropLeaf(l)
	nd := c.node(l)
	p := c.node(nd.parent)
	if nd.prev == noNode {
		p.first = nd.next
	} else {
		c.node(nd.prev).next = nd.next
	}
	if nd.next == noNode {
		p.last = nd.prev
	} else {
		c.node(nd.next).prev = nd.prev
	}
	if nd.parent != 0 && p.first == noNode {
		c.addLeaf(nd.parent)
	}
	c.free = append(c.free, l)
}

// evict removes k nodes, least recently used leaves first; a parent left childless joins
// the candidates, so whole cold branches go before any part of a warm one.
//
// Which leaf is least recently used is never a tie: an operation stamps its clock on one
// path, and no two leaves (nor a leaf and a parent left childless) share a path. So the
// order of the candidates in the heap does not matter, and the result is that of
// popping leaves in clock order from a walk of the whole trie.
func (c *prefixCache) evict(k int) {
	c.epoch++
	h := make([]leaf, len(c.leaves))
	for i, id := range c.leaves {
		h[i] = leaf{used: c.node(id).used, id: id}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		leafDown(h, i, len(h))
	}
	for k > 0 && len(h) > 0 {
		n := len(h) - 1
		h[0], h[n] = h[n], h[0]
		leafDown(h, 0, n)
		l := h[n].id
		h = h[:n]
		p := c.node(l).parent
		c.unlink(l)
		c.size--
		k--
		if pn := c.node(p); p != 0 && pn.first == noNode {
			h = append(h, leaf{used: pn.used, id: p})
			leafUp(h, len(h)-1)
		}
	}
}

// leaf is an eviction candidate.
type leaf struct {
	used uint64
	id   int32
}

func leafUp(h []leaf, j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !(h[j].used < h[i].used) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func leafDown(h []leaf, i0, n int) {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 {
			break
		}
		j := j1
		if j2 := j1 + 1; j2 < n && h[j2].used < h[j1].used {
			j = j2
		}
		if !(h[j].used < h[i].used) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// flush empties the cache (POST /flush_cache).
func (c *prefixCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset()
}
