package sim

import (
	"container/heap"
	"sync"
)

// prefixCache is a token trie standing in for SGLang's radix cache: match returns the
// longest stored prefix, insert stores a sequence, and past capacity the least recently
// used leaves are evicted. One node per token.
type prefixCache struct {
	mu       sync.Mutex
	root     cacheNode
	size     int
	capacity int
	clock    uint64
}

type cacheNode struct {
	id       uint32
	parent   *cacheNode
	children []*cacheNode
	used     uint64
}

func newPrefixCache(capacity int) *prefixCache { return &prefixCache{capacity: capacity} }

func (n *cacheNode) child(id uint32) *cacheNode {
	for _, c := range n.children {
		if c.id == id {
			return c
		}
	}
	return nil
}

// match is the length of the longest cached prefix of ids; it refreshes the matched path.
func (c *prefixCache) match(ids []uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	n := &c.root
	k := 0
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

// insert stores ids, then evicts down to capacity.
func (c *prefixCache) insert(ids []uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	n := &c.root
	for _, id := range ids {
		next := n.child(id)
		if next == nil {
			next = &cacheNode{id: id, parent: n}
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

// evict removes k nodes, least recently used leaves first; a parent left childless joins
// the candidates, so whole cold branches go before any part of a warm one.
func (c *prefixCache) evict(k int) {
	var h leafHeap
	var walk func(n *cacheNode)
	walk = func(n *cacheNode) {
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
		l := heap.Pop(&h).(*cacheNode)
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

type leafHeap []*cacheNode

func (h leafHeap) Len() int           { return len(h) }
func (h leafHeap) Less(i, j int) bool { return h[i].used < h[j].used }
func (h leafHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leafHeap) Push(x any)        { *h = append(*h, x.(*cacheNode)) }
func (h *leafHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// flush empties the cache (POST /flush_cache).
func (c *prefixCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.root = cacheNode{}
	c.size = 0
}
