package prepare

import (
	"fmt"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// TreeValues are the direct-branch backups and refined values of every node,
// in dense slices indexed by node id.
type TreeValues struct {
	Tree   *tree.Tree
	Config RewardConfig
	// Backup is G_bar(s), meaningful where HasBackup(s).
	Backup []float64
	// Refined is V*(s), meaningful where HasRefined(s).
	Refined []float64
	// Count is n_s, the completed (non-failed) children of s.
	Count []int
	// Reward is r(parent -> s) as preparation uses it: the node's reward, or
	// TruncatedReward on a truncated edge; 0 for the root and excluded nodes.
	Reward []float64
	// Excluded marks failed nodes and everything under them.
	Excluded []bool
}

// Values validates t against cfg and computes n_s, G_bar and V* for every
// node, deepest first (ALGORITHM.md §5.3–5.4). Failed subtrees are left out of
// every count and sum. A nonterminal node with no completed children takes
// V* = V_phi, so it must have a critic prediction unless it is the root (whose
// value nothing reads then).
func Values(t *tree.Tree, cfg RewardConfig) (*TreeValues, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Revalidate: the full check of Validate, except that spans already
	// checked as their node entered the tree are not re-read token by token;
	// search calls this once per branching round.
	if err := t.Revalidate(); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	n := len(t.Nodes)
	v := &TreeValues{
		Tree: t, Config: cfg,
		Backup: make([]float64, n), Refined: make([]float64, n), Count: make([]int, n),
		Reward: make([]float64, n),
	}
	order := t.BreadthFirst()
	v.Excluded = t.Excluded(order)
	for _, id := range order[1:] {
		nd := &t.Nodes[id]
		switch {
		case v.Excluded[id]:
		case nd.Truncated:
			v.Reward[id] = cfg.TruncatedReward
		case nd.Reward < cfg.RewardMin || nd.Reward > cfg.RewardMax:
			return nil, status.Wrap(status.InvalidArgument, &tree.ValidationError{NodeID: id, Field: "reward",
				Reason: fmt.Sprintf("%g is outside [reward_min, reward_max] = [%g, %g]", nd.Reward, cfg.RewardMin, cfg.RewardMax)}, "prepare")
		default:
			v.Reward[id] = nd.Reward
		}
	}
	kappa := cfg.CriticWeight
	for i := len(order) - 1; i >= 0; i-- {
		id := order[i]
		if v.Excluded[id] {
			continue
		}
		nd := &t.Nodes[id]
		if nd.Terminal() {
			if nd.Truncated && cfg.Truncation == TruncationBootstrap {
				if nd.Critic == nil {
					return nil, missingCritic(id, "truncation=\"bootstrap\" sets V* of a truncated node to its critic prediction")
				}
				v.Refined[id] = *nd.Critic
			}
			continue
		}
		sum, count := 0.0, 0
		for _, c := range nd.Children {
			if !v.Excluded[c] {
				sum += v.Reward[c] + cfg.Gamma*v.Refined[c]
				count++
			}
		}
		v.Count[id] = count
		switch {
		case count > 0 && nd.Critic == nil:
			// No prior: kappa contributes nothing and V* is the backup itself.
			v.Backup[id] = sum / float64(count)
			v.Refined[id] = v.Backup[id]
		case count > 0:
			// (kappa*V_phi + n*G_bar)/(kappa + n) with n*G_bar taken as the sum
			// itself, so kappa = 0 gives V* == G_bar exactly.
			v.Backup[id] = sum / float64(count)
			v.Refined[id] = (kappa**nd.Critic + sum) / (kappa + float64(count))
		case nd.Critic != nil:
			v.Refined[id] = *nd.Critic
		case id != 0:
			return nil, missingCritic(id, "a nonterminal node without completed children uses V* = V_phi")
		}
	}
	return v, nil
}

func missingCritic(id int, why string) error {
	return status.Wrap(status.InvalidArgument, &tree.ValidationError{NodeID: id, Field: "critic", Reason: "missing: " + why}, "prepare")
}

// HasBackup reports whether G_bar(id) is defined: a completed nonterminal
// node with at least one completed child.
func (v *TreeValues) HasBackup(id int) bool {
	return !v.Excluded[id] && !v.Tree.Nodes[id].Terminal() && v.Count[id] > 0
}

// HasRefined reports whether V*(id) is defined: every completed node except
// an unscored root without completed children.
func (v *TreeValues) HasRefined(id int) bool {
	return !v.Excluded[id] && !(id == 0 && v.Count[0] == 0 && v.Tree.Nodes[0].Critic == nil)
}

// Advantage is the segment TD error of edge parent(id) -> id:
// r + gamma*V*(id) - V*(parent). id must be a completed non-root node.
func (v *TreeValues) Advantage(id int) float64 {
	return v.Reward[id] + v.Config.Gamma*v.Refined[id] - v.Refined[v.Tree.Nodes[id].Parent]
}

// CriticTargets pairs every scored, completed nonterminal node with n_s >= 1
// with its unshrunk backup G_bar (ALGORITHM.md §5.5), in node-id order. The
// samples read their context text from the tree when asked.
func CriticTargets(v *TreeValues) []CriticSample {
	t := v.Tree
	n := 0
	for id := range t.Nodes {
		if t.Nodes[id].Critic != nil && v.HasBackup(id) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	diag := newDiagMatrix(criticDiagnostics, n)
	out := make([]CriticSample, 0, n)
	for id := range t.Nodes {
		nd := &t.Nodes[id]
		if nd.Critic == nil || !v.HasBackup(id) {
			continue
		}
		out = append(out, CriticSample{
			NodeID:      id,
			Target:      v.Backup[id],
			Diagnostics: diag.row(*nd.Critic, v.Refined[id], float64(v.Count[id])),
			src:         t,
		})
	}
	return out
}

// KappaHat is the diagnostic of ALGORITHM.md §5.4, computed over the critic
// targets in [reward_min, reward_max]-normalised units:
// sigma_hat^2 = mean p(1-p) with p the normalised G_bar, tau_hat^2 =
// max(0, mean[(V_phi - G_bar)^2 - sigma_hat^2/n_s]), kappa_hat =
// sigma_hat^2/tau_hat^2. ok is false when there are no targets or tau_hat^2 is
// 0. The tree's own value is reported only; docs/signal.md §R's CriticRule
// pools it over earlier batches to set kappa.
func (v *TreeValues) KappaHat() (kappaHat float64, ok bool) {
	return v.CriticFit().KappaHat()
}
