package sim

import (
	"bytes"
	"hash/fnv"
	"sync"
	"sync/atomic"
)

// scriptTree is the part of the model's script that requests have explored so far, shared
// by every request of a server. The script is a pure function of its state, so a state's
// branches can be computed once and reused: a request then walks text that earlier ones
// already wrote instead of formatting every line again. What a request sees is unchanged,
// only cheaper. It also remembers what each conversation context says (problem, tools).
//
// A tree stops growing at maxTreeStates states (or maxTreeContexts contexts) and the model
// starts a fresh one, so memory stays bounded however long the server runs; requests that
// still hold states of the old tree finish on it.
type scriptTree struct {
	states atomic.Int64
	full   atomic.Bool

	mu       sync.Mutex
	roots    map[rootKey]*sstate
	generic  map[uint64]*problemDef
	contexts map[string]*ctxInfo
}

const (
	maxTreeStates   = 1 << 15
	maxTreeContexts = 1 << 12
)

// rootKey names a script's first state: the solution, the tool call or the wrap-up of a
// problem (a tool call also by its two texts).
type rootKey struct {
	def  *problemDef
	kind scriptKind
	tool [2]string
}

// ctxInfo is what the model reads from the conversation before the assistant's turn.
type ctxInfo struct {
	def        *problemDef
	tools      []toolSpec
	toolResult bool // the last user turn holds a <tool_response>
}

func newScriptTree() *scriptTree {
	return &scriptTree{roots: map[rootKey]*sstate{}, generic: map[uint64]*problemDef{}, contexts: map[string]*ctxInfo{}}
}

// tree is the model's current tree, replaced by a fresh one once full.
func (m *model) tree() *scriptTree {
	t := m.shared.Load()
	if t == nil || t.full.Load() {
		fresh := newScriptTree()
		if m.shared.CompareAndSwap(t, fresh) {
			return fresh
		}
		return m.shared.Load()
	}
	return t
}

// kidsCell holds the branches of one state of a tree, computed once. A state reaches its
// cell through sstate.kids; states are copied to make their successors, so a cell names
// its owner and a copy's inherited cell does not count.
type kidsCell struct {
	owner *sstate
	tree  *scriptTree
	once  sync.Once
	kids  []branch
}

// children are the branches out of s, computed once per state of a tree. A state's cell
// is set while its parent's branches are computed, before they are published (by the
// parent's once), and never after.
func (s *sstate) children() []branch {
	c := s.kids
	if c == nil || c.owner != s {
		return s.branches()
	}
	c.once.Do(func() {
		kids := s.branches()
		if c.tree.states.Add(int64(len(kids))) > maxTreeStates {
			c.tree.full.Store(true) // new requests start a fresh tree
		}
		for _, b := range kids {
			if n := b.next; n != nil && (n.kids == nil || n.kids.owner != n) {
				n.kids = &kidsCell{owner: n, tree: c.tree}
			}
		}
		c.kids = kids
	})
	return c.kids
}

// root is the interned first state for key; make builds it on first use.
func (t *scriptTree) root(key rootKey, build func() *sstate) *sstate {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.roots[key]; ok {
		return r
	}
	r := build()
	if len(t.roots) < maxTreeContexts {
		r.kids = &kidsCell{owner: r, tree: t}
		t.roots[key] = r
	} else {
		t.full.Store(true)
	}
	return r
}

// genericDef is genericProblem(h), one definition per tree so its states are shared.
func (t *scriptTree) genericDef(h uint64) *problemDef {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.generic[h]; ok {
		return d
	}
	d := genericProblem(h)
	if len(t.generic) < maxTreeContexts {
		t.generic[h] = d
	} else {
		t.full.Store(true)
	}
	return d
}

// context reads an assistant turn's context (memoised: every segment of a conversation
// shares it).
func (t *scriptTree) context(ctx []byte) *ctxInfo {
	t.mu.Lock()
	info, ok := t.contexts[string(ctx)]
	t.mu.Unlock()
	if ok {
		return info
	}
	info = t.analyze(ctx, findProblem(ctx), true)
	t.mu.Lock()
	if len(t.contexts) < maxTreeContexts {
		t.contexts[string(ctx)] = info
	} else {
		t.full.Store(true)
	}
	t.mu.Unlock()
	return info
}

// analyze finishes reading a context whose bundled problem (if any) is known.
func (t *scriptTree) analyze(ctx []byte, def *problemDef, anchored bool) *ctxInfo {
	if def == nil {
		if !anchored && len(ctx) == 0 {
			def = t.genericDef(0) // nothing to anchor on: one fixed wrap-up answer
		} else {
			h := fnv.New64a()
			h.Write(ctx)
			def = t.genericDef(h.Sum64())
		}
	}
	lastUser := ctx
	if i := bytes.LastIndex(ctx, []byte("<|im_start|>user")); i >= 0 {
		lastUser = ctx[i:]
	}
	return &ctxInfo{def: def, tools: parseTools(string(ctx)), toolResult: bytes.Contains(lastUser, []byte("<tool_response>"))}
}
