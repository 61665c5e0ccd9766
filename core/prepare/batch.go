package prepare

import (
	"fmt"
	"math"

	"github.com/focus-go/focus-go/core/tree"
)

// InexactPrefix opens the failure message of an inexact edge, which trained no actor.
const InexactPrefix = "inexact edge: "

// Failure is a failed branch (the node marked failed and its message), or an inexact
// edge that made no actor sample (InexactPrefix + the node's Inexact reason).
type Failure struct {
	NodeID  int    `json:"node_id"`
	Message string `json:"message"`
}

// Stats are a batch's collection statistics. The JSON keys are the binding
// Batch.stats keys.
type Stats struct {
	Rollouts           int     `json:"rollouts"`
	Nodes              int     `json:"nodes"`
	GeneratedTokens    int     `json:"generated_tokens"`
	PrefixTokensReused int     `json:"prefix_tokens_reused"`
	BudgetUnspent      int     `json:"budget_unspent"`
	AdvantageMean      float64 `json:"advantage_mean"`
	AdvantageStd       float64 `json:"advantage_std"`
	Failures           int     `json:"failures"`
	WallSeconds        float64 `json:"wall_seconds"`
	PolicySeconds      float64 `json:"policy_seconds"`
}

// Batch is what one prompt's tree prepares into.
//
// Its JSON form carries the samples' metadata, not their token spans, which
// cross the C boundary through export.Flat or ActorSample.Spans.
type Batch struct {
	ProblemID    string         `json:"problem_id"`
	Actor        []ActorSample  `json:"actor"`
	Critic       []CriticSample `json:"critic"`
	RewardConfig *RewardConfig  `json:"reward_config"` // nil for batches not made by Prepare
	Stats        Stats          `json:"stats"`
	Failures     []Failure      `json:"failures"`
}

// Len is the number of samples, actor and critic.
func (b *Batch) Len() int { return len(b.Actor) + len(b.Critic) }

// Prepare computes values, critic targets and (unless est is nil) actor
// samples for t. Failed branches are excluded and listed in Failures; inexact
// edges (tree.Node.Inexact) make no actor sample and are listed there too.
func Prepare(t *tree.Tree, cfg RewardConfig, est Estimator) (*Batch, error) {
	v, err := Values(t, cfg)
	if err != nil {
		return nil, err
	}
	b := &Batch{ProblemID: t.ProblemID, Critic: CriticTargets(v), RewardConfig: &cfg}
	if est != nil {
		if b.Actor, err = est.Estimate(v); err != nil {
			return nil, fmt.Errorf("prepare: %s: %w", est.Name(), err)
		}
	}
	// An inexact edge (tree.Node.Inexact) trains no actor: whatever the estimator made
	// for it is dropped, and the failures say why. Its values and critic target stay.
	kept := b.Actor[:0]
	for _, a := range b.Actor {
		if a.NodeID > 0 && a.NodeID < len(t.Nodes) && t.Nodes[a.NodeID].Inexact != "" {
			continue
		}
		kept = append(kept, a)
	}
	b.Actor = kept
	// One pass over the nodes: failures, leaves, and every edge's generated
	// tokens and spans, which the actor samples keep.
	n := len(t.Nodes)
	gen := make([]int32, 2*n) // gen[2*id]: generated tokens, gen[2*id+1]: generated spans
	leaves, trainable := 0, 0
	for id := range t.Nodes {
		nd := &t.Nodes[id]
		switch {
		case nd.Failed != "":
			b.Failures = append(b.Failures, Failure{NodeID: id, Message: nd.Failed})
		case nd.Inexact != "":
			b.Failures = append(b.Failures, Failure{NodeID: id, Message: InexactPrefix + nd.Inexact})
		}
		if id > 0 && len(nd.Children) == 0 {
			leaves++
		}
		edge, spans := t.EdgeTrainable(id)
		gen[2*id], gen[2*id+1] = int32(edge), int32(spans)
		trainable += edge
	}
	visit := Visitation(v)
	for i := range b.Actor {
		a := &b.Actor[i]
		if a.src == t {
			a.Visitation = visit[a.NodeID]
			a.counted, a.edgeTokens, a.numSpans = true, int(gen[2*a.NodeID]), int(gen[2*a.NodeID+1])
		}
	}
	// A tree assembled outside the engine carries no stats; its leaves (one per
	// rollout) and trainable tokens are lower bounds the engine's counts meet.
	b.Stats = Stats{
		Rollouts:           max(t.Stats.Rollouts, leaves),
		Nodes:              len(t.Nodes),
		GeneratedTokens:    max(t.Stats.GeneratedTokens, trainable),
		PrefixTokensReused: t.Stats.PrefixTokensReused,
		BudgetUnspent:      t.Stats.BudgetUnspent,
		Failures:           len(b.Failures),
		WallSeconds:        t.Stats.WallSeconds,
		PolicySeconds:      t.Stats.PolicySeconds,
	}
	b.Stats.AdvantageMean, b.Stats.AdvantageStd = weightMoments(b.Actor)
	return b, nil
}

// weightMoments returns the mean and population standard deviation of the
// actor weights (two passes, for accuracy).
func weightMoments(actor []ActorSample) (mean, std float64) {
	if len(actor) == 0 {
		return 0, 0
	}
	for i := range actor {
		mean += actor[i].Weight
	}
	mean /= float64(len(actor))
	for i := range actor {
		d := actor[i].Weight - mean
		std += d * d
	}
	return mean, math.Sqrt(std / float64(len(actor)))
}
