// Package treetest builds search trees for tests and benchmarks: seeded random
// trees that exercise every node state, GRPO-style chains, and large
// search-shaped trees. Like net/http/httptest it is a public helper package,
// so tests and benchmarks in other packages share one generator.
//
// Every function is deterministic in its arguments and safe for concurrent
// use; each call returns a new tree owned by the caller.
package treetest

import (
	"math/rand/v2"

	"github.com/focus-go/focus-go/core/tree"
)

// Options shape a Random tree. Zero values pick small defaults.
type Options struct {
	Rollouts      int     // rollouts to run (default 8)
	MaxSegments   int     // segments per rollout at most (default 4)
	MaxSpans      int     // spans per edge at most (default 2)
	MaxSpanTokens int     // tokens per span at most (default 6)
	PFailed       float64 // chance a rollout fails
	PTruncated    float64 // chance a finished rollout is truncated rather than done
	PCancelled    float64 // chance a rollout is cancelled before finishing
	PNoCritic     float64 // chance a checkpoint is left unscored (when allowed)
	PShaping      float64 // chance a nonterminal edge carries a shaping reward
	Binary        bool    // terminal rewards in {0, 1} instead of [0, 1]
}

func (o Options) withDefaults() Options {
	if o.Rollouts <= 0 {
		o.Rollouts = 8
	}
	if o.MaxSegments <= 0 {
		o.MaxSegments = 4
	}
	if o.MaxSpans <= 0 {
		o.MaxSpans = 2
	}
	if o.MaxSpanTokens <= 0 {
		o.MaxSpanTokens = 6
	}
	return o
}

// Random grows a tree the way a search does: each rollout starts at the root
// or at a random open checkpoint and adds a chain of segments that ends done,
// truncated, failed (its first node marked, so the whole rollout is one
// failed subtree) or cancelled (a nonterminal leaf). Rewards lie in [0, 1].
// Every checkpoint that could end up with no completed children is scored, so
// the tree always prepares without error under the default RewardConfig.
func Random(r *rand.Rand, o Options) *tree.Tree {
	o = o.withDefaults()
	t := tree.New("random", span(r, 1+r.IntN(o.MaxSpanTokens), false), "prompt|")
	t.Root().Critic = ptr(r.Float64())
	var open []int // nonterminal nodes outside failed rollouts
	for range o.Rollouts {
		start := 0
		if len(open) > 0 && r.IntN(3) > 0 {
			start = open[r.IntN(len(open))]
		}
		failed := r.Float64() < o.PFailed
		cancelled := !failed && r.Float64() < o.PCancelled
		segs := 1 + r.IntN(o.MaxSegments)
		at := start
		for s := range segs {
			last := s == segs-1
			nd := tree.Node{Spans: edge(r, o), Text: "seg|", SearchPass: r.IntN(3)}
			if s == 0 && failed {
				nd.Failed = "rollout failed"
			}
			if !last && r.Float64() < o.PShaping {
				nd.Reward = r.Float64() / 4
			}
			switch {
			case last && cancelled:
				nd.Critic = ptr(r.Float64())
			case last:
				nd.Reward = reward(r, o.Binary)
				nd.Done = true
				if r.Float64() < o.PTruncated {
					nd.Truncated = true
					nd.Done = false
					nd.Reward = 0
					nd.Critic = ptr(r.Float64()) // bootstrap truncation reads it
				}
			default:
				if r.Float64() >= o.PNoCritic {
					nd.Critic = ptr(r.Float64())
				}
			}
			id, err := t.AddChild(at, nd)
			if err != nil {
				panic(err) // the generator only builds valid trees
			}
			if !last && !failed {
				open = append(open, id)
			}
			at = id
		}
	}
	scoreChildless(t)
	t.Stats.Rollouts = o.Rollouts
	return t
}

// scoreChildless gives a critic prediction to every nonterminal node whose
// completed children were all failed: its V* falls back to V_phi.
func scoreChildless(t *tree.Tree) {
	for i := range t.Nodes {
		nd := &t.Nodes[i]
		if nd.Terminal() || nd.Critic != nil {
			continue
		}
		ok := false
		for _, c := range nd.Children {
			ok = ok || t.Nodes[c].Failed == ""
		}
		if !ok {
			nd.Critic = ptr(0.5)
		}
	}
}

// Chains builds the Independent (GRPO) shape: one chain of segments per
// reward from the root, each ending done with that reward; every checkpoint
// is scored with critic.
func Chains(rewards []float64, segments, tokens int, critic float64) *tree.Tree {
	r := rand.New(rand.NewPCG(1, uint64(len(rewards))))
	t := tree.New("chains", span(r, tokens, false), "prompt|")
	t.Root().Critic = ptr(critic)
	for _, rw := range rewards {
		at := 0
		for s := range segments {
			nd := tree.Node{Spans: []tree.PackedSequence{span(r, tokens, true)}, Text: "seg|"}
			if s == segments-1 {
				nd.Done, nd.Reward = true, rw
			} else {
				nd.Critic = ptr(critic)
			}
			at, _ = t.AddChild(at, nd)
		}
	}
	t.Stats.Rollouts = len(rewards)
	return t
}

// Search builds a benchmark-sized tree shaped like a Selective search: the
// first half of the rollouts are root chains of `segments` edges, the rest
// branch from uniformly chosen open checkpoints and run to the same depth.
// Each edge is one fully generated span of `tokens` tokens; the prompt has
// 128 tokens; every checkpoint is scored.
func Search(rollouts, segments, tokens int, seed uint64) *tree.Tree {
	r := rand.New(rand.NewPCG(seed, 7))
	t := tree.New("search", span(r, 128, false), "prompt|")
	t.Root().Critic = ptr(0.5)
	open := make([]int, 0, rollouts*segments)
	warmup := max(1, rollouts/2)
	for i := range rollouts {
		start, pass := 0, 0
		if i >= warmup && len(open) > 0 {
			start, pass = open[r.IntN(len(open))], 1+(i-warmup)/4
		}
		at := start
		for d := t.Nodes[start].Depth; d < segments; d++ {
			nd := tree.Node{Spans: []tree.PackedSequence{span(r, tokens, true)}, Text: "segment text|", SearchPass: pass}
			if d == segments-1 {
				nd.Done, nd.Reward = true, float64(r.IntN(2))
			} else {
				nd.Critic = ptr(r.Float64())
			}
			at, _ = t.AddChild(at, nd)
			if !t.Nodes[at].Done {
				open = append(open, at)
			}
		}
	}
	t.Stats.Rollouts = rollouts
	return t
}

func edge(r *rand.Rand, o Options) []tree.PackedSequence {
	n := 1 + r.IntN(o.MaxSpans)
	spans := make([]tree.PackedSequence, n)
	for i := range spans {
		// Chat glue before a generated span, tool results after it: mixed spans
		// start with conditioning tokens and then switch to generated ones.
		switch r.IntN(3) {
		case 0:
			spans[i] = span(r, 1+r.IntN(o.MaxSpanTokens), false)
		case 1:
			spans[i] = span(r, 1+r.IntN(o.MaxSpanTokens), true)
		default:
			glue := span(r, 1+r.IntN(o.MaxSpanTokens), false)
			spans[i] = glue.AppendGenerated(span(r, 1+r.IntN(o.MaxSpanTokens), true))
		}
	}
	return spans
}

func span(r *rand.Rand, n int, generated bool) tree.PackedSequence {
	s := tree.PackedSequence{Tokens: make([]uint32, n), Trainable: make([]bool, n), Logprobs: make([]float64, n)}
	for i := range s.Tokens {
		s.Tokens[i] = uint32(r.IntN(150000))
		if generated {
			s.Trainable[i] = true
			s.Logprobs[i] = -r.ExpFloat64()
		}
	}
	return s
}

func reward(r *rand.Rand, binary bool) float64 {
	if binary {
		return float64(r.IntN(2))
	}
	return r.Float64()
}

func ptr(v float64) *float64 { return &v }

// Figure61 builds the tree of ALGORITHM.md §6.1 with every critic prediction
// 0.5: the root s (id 0, prompt tokens 1 2 3, text "s") has children a (id 1,
// text "a", generated 10 11) and b (id 2, text "b", generated 20); a has three
// done children with reward 1 (ids 3, 4, 5, generated 30), b one with reward
// 0 (id 6, generated 40). Generated token i of an edge has log-probability
// -0.25*(i+1).
func Figure61() *tree.Tree {
	t := tree.New("fig61", Conditioning(1, 2, 3), "s")
	t.Root().Critic = ptr(0.5)
	a, _ := t.AddChild(0, tree.Node{Spans: []tree.PackedSequence{Generated(10, 11)}, Text: "a", Critic: ptr(0.5)})
	b, _ := t.AddChild(0, tree.Node{Spans: []tree.PackedSequence{Generated(20)}, Text: "b", Critic: ptr(0.5)})
	for range 3 {
		t.AddChild(a, tree.Node{Spans: []tree.PackedSequence{Generated(30)}, Text: "+", Done: true, Reward: 1})
	}
	t.AddChild(b, tree.Node{Spans: []tree.PackedSequence{Generated(40)}, Text: "-", Done: true, Reward: 0})
	return t
}

// Generated is a span of generated tokens; token i has log-probability
// -0.25*(i+1).
func Generated(tokens ...uint32) tree.PackedSequence {
	s := Conditioning(tokens...)
	for i := range tokens {
		s.Trainable[i], s.Logprobs[i] = true, -0.25*float64(i+1)
	}
	return s
}

// Conditioning is a span of conditioning (not generated) tokens.
func Conditioning(tokens ...uint32) tree.PackedSequence {
	return tree.PackedSequence{Tokens: tokens, Trainable: make([]bool, len(tokens)), Logprobs: make([]float64, len(tokens))}
}
