package prepare_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

var treeShapes = treetest.Options{Rollouts: 12, MaxSegments: 5, PFailed: 0.15, PTruncated: 0.15, PCancelled: 0.1, PNoCritic: 0.3, PShaping: 0.2}

// randomCase draws a tree and a reward configuration (gamma = 1 unless
// anyGamma) from r.
func randomCase(r *rand.Rand, anyGamma bool) (*tree.Tree, prepare.RewardConfig) {
	o := treeShapes
	o.Rollouts = 1 + r.IntN(24)
	o.Binary = r.IntN(2) == 0
	tr := treetest.Random(r, o)
	cfg := prepare.DefaultRewardConfig()
	cfg.CriticWeight = []float64{0, 0.5, 1, 2, 64}[r.IntN(5)]
	cfg.TruncatedReward = r.Float64()
	if r.IntN(2) == 0 {
		cfg.Truncation = prepare.TruncationBootstrap
	}
	if anyGamma {
		cfg.Gamma = 0.5 + r.Float64()/2
	}
	return tr, cfg
}

const propertyTrees = 3000

// TestTelescoping is U1: with gamma = 1 the advantages along the path to any
// completed node c sum to (rewards on the path) + V*(c) - V*(root), i.e.
// R_leaf - V*(root) at a terminal leaf.
func TestTelescoping(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	for i := range propertyTrees {
		tr, cfg := randomCase(r, false)
		v, err := prepare.Values(tr, cfg)
		require.NoError(t, err)
		b, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
		require.NoError(t, err)
		adv := advantages(b)
		for id := 1; id < tr.Len(); id++ {
			if v.Excluded[id] {
				continue
			}
			sumA, ret := 0.0, 0.0
			for _, n := range tr.Path(id)[1:] {
				sumA += adv[n]
				ret += v.Reward[n]
			}
			want := ret + v.Refined[id] - v.Refined[0]
			if tr.Nodes[id].Done && !tr.Nodes[id].Truncated {
				want = ret - v.Refined[0]
			}
			require.InDelta(t, want, sumA, 1e-9, "tree %d node %d kappa %g", i, id, cfg.CriticWeight)
		}
	}
}

// TestBranchSum is U2: sum over completed children of A(s->c) equals
// n_s kappa (G_bar(s) - V_phi(s)) / (kappa + n_s), for any gamma; 0 where s
// has no critic prediction (V* = G_bar).
func TestBranchSum(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	for i := range propertyTrees {
		tr, cfg := randomCase(r, true)
		v, err := prepare.Values(tr, cfg)
		require.NoError(t, err)
		b, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
		require.NoError(t, err)
		adv := advantages(b)
		for id := range tr.Nodes {
			if !v.HasBackup(id) {
				continue
			}
			sum := 0.0
			for _, c := range tr.Nodes[id].Children {
				if !v.Excluded[c] {
					sum += adv[c]
				}
			}
			want := 0.0
			if crit := tr.Nodes[id].Critic; crit != nil {
				n, k := float64(v.Count[id]), cfg.CriticWeight
				want = n * k * (v.Backup[id] - *crit) / (k + n)
			}
			require.InDelta(t, want, sum, 1e-9, "tree %d node %d", i, id)
		}
	}
}

// TestChains is U3: on Independent chains with kappa = 0 every non-root edge
// has A = 0 exactly and the first edge A = R_i - mean R; GroupBaseline gives
// R_i - mean R on every edge of chain i.
func TestChains(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	for i := range 500 {
		n, segs := 1+r.IntN(16), 1+r.IntN(6)
		rewards := make([]float64, n)
		for j := range rewards {
			rewards[j] = float64(r.IntN(2))
			if i%2 == 1 {
				rewards[j] = r.Float64()
			}
		}
		tr := treetest.Chains(rewards, segs, 3, r.Float64())
		// Shaping rewards on some intermediate edges: R_i is their sum.
		for id := 1; id < tr.Len(); id++ {
			if !tr.Nodes[id].Done && r.IntN(3) == 0 {
				tr.Nodes[id].Reward = r.Float64() / 8
			}
		}
		cfg := prepare.DefaultRewardConfig()
		cfg.CriticWeight = 0
		v, err := prepare.Values(tr, cfg)
		require.NoError(t, err)
		returns := map[int]float64{} // first node of each chain -> R_i
		mean := 0.0
		for id := range tr.Nodes {
			if tr.Nodes[id].Done {
				path := tr.Path(id)
				R := 0.0
				for _, p := range path[1:] {
					R += v.Reward[p]
				}
				returns[path[1]] = R
				mean += R / float64(n)
			}
		}
		td, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
		require.NoError(t, err)
		gb, err := prepare.Prepare(tr, cfg, prepare.GroupBaseline{})
		require.NoError(t, err)
		require.Len(t, td.Actor, n*segs)
		for k, s := range td.Actor {
			first := tr.Path(s.NodeID)[1]
			if s.GroupID != 0 {
				require.Equal(t, 0.0, s.Weight, "tree %d node %d: non-root chain edge", i, s.NodeID)
			} else {
				require.InDelta(t, returns[first]-mean, s.Weight, 1e-9)
			}
			require.InDelta(t, returns[first]-mean, gb.Actor[k].Weight, 1e-12)
			require.Equal(t, gb.Actor[first-1].Weight, gb.Actor[k].Weight, "one weight per chain")
		}
	}
}

// TestTerminalTruncatedFailedRules is U5.
func TestTerminalTruncatedFailedRules(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	for i := range propertyTrees / 3 {
		tr, cfg := randomCase(r, true)
		v, err := prepare.Values(tr, cfg)
		require.NoError(t, err)
		b, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
		require.NoError(t, err)
		targets := map[int]bool{}
		for _, c := range b.Critic {
			targets[c.NodeID] = true
		}
		for id, nd := range tr.Nodes {
			switch {
			case v.Excluded[id]:
				require.False(t, targets[id])
			case nd.Truncated:
				require.Equal(t, cfg.TruncatedReward, v.Reward[id])
				if cfg.Truncation == prepare.TruncationBootstrap {
					require.Equal(t, *nd.Critic, v.Refined[id])
				} else {
					require.Zero(t, v.Refined[id])
				}
				require.False(t, targets[id])
			case nd.Done:
				require.Zero(t, v.Refined[id])
				require.Equal(t, nd.Reward, v.Reward[id])
				require.False(t, targets[id])
			case v.Count[id] == 0 && nd.Critic != nil:
				require.Equal(t, *nd.Critic, v.Refined[id], "n_s = 0 uses V_phi")
				require.False(t, targets[id], "n_s = 0 yields no target")
			default:
				require.Equal(t, nd.Critic != nil && v.Count[id] > 0, targets[id])
			}
		}

		// Grafting a failed rollout onto any completed checkpoint changes no
		// count or value, and it is listed once in the failures.
		var open []int
		for id, nd := range tr.Nodes {
			if !v.Excluded[id] && !nd.Terminal() {
				open = append(open, id)
			}
		}
		at := open[r.IntN(len(open))]
		f, err := tr.AddChild(at, tree.Node{Failed: "tool timeout", Critic: ptrF(0.3)})
		require.NoError(t, err)
		_, err = tr.AddChild(f, tree.Node{Done: true, Reward: 1})
		require.NoError(t, err)
		v2, err := prepare.Values(tr, cfg)
		require.NoError(t, err)
		n := len(v.Count)
		require.Equal(t, v.Count, v2.Count[:n], "tree %d", i)
		require.Equal(t, bits(v.Refined), bits(v2.Refined[:n]))
		require.Equal(t, bits(v.Backup), bits(v2.Backup[:n]))
		require.True(t, v2.Excluded[f] && v2.Excluded[f+1])
		b2, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
		require.NoError(t, err)
		require.Contains(t, b2.Failures, prepare.Failure{NodeID: f, Message: "tool timeout"})
		require.Len(t, b2.Failures, len(b.Failures)+1)
		require.Equal(t, len(b2.Failures), b2.Stats.Failures)
		require.Equal(t, len(b.Actor), len(b2.Actor))
	}
}

func ptrF(v float64) *float64 { return &v }

// TestFiniteAndBitwiseDeterministic checks that every value and weight is
// finite and that the same tree and config, also after a JSON round trip,
// give the same numbers bit for bit.
func TestFiniteAndBitwiseDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 1))
	for i := range propertyTrees / 3 {
		tr, cfg := randomCase(r, true)
		data, err := tree.Marshal(tr)
		require.NoError(t, err)
		back, err := tree.Unmarshal(data)
		require.NoError(t, err)
		require.Equal(t, tr, back, "JSON round trip is lossless")
		for _, est := range []prepare.Estimator{prepare.DirectBranchTd{}, prepare.GroupBaseline{}, prepare.TreeGroupBaseline{}} {
			b1, err := prepare.Prepare(tr, cfg, est)
			require.NoError(t, err)
			b2, err := prepare.Prepare(back, cfg, est)
			require.NoError(t, err)
			require.Equal(t, fingerprint(b1), fingerprint(b2), "tree %d", i)
			for _, a := range b1.Actor {
				require.True(t, isFinite(a.Weight))
				for k := range a.Diagnostics.Len() {
					d := a.Diagnostics.At(k)
					require.True(t, isFinite(d.Value), d.Name)
				}
			}
			for _, c := range b1.Critic {
				require.True(t, isFinite(c.Target))
			}
			require.True(t, isFinite(b1.Stats.AdvantageMean) && isFinite(b1.Stats.AdvantageStd))
		}
		v, err := prepare.Values(tr, cfg)
		require.NoError(t, err)
		for id := range tr.Nodes {
			require.True(t, isFinite(v.Refined[id]) && isFinite(v.Backup[id]) && isFinite(v.Reward[id]))
		}
	}
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func advantages(b *prepare.Batch) map[int]float64 {
	m := make(map[int]float64, len(b.Actor))
	for _, a := range b.Actor {
		m[a.NodeID] = a.Weight
	}
	return m
}

func bits(xs []float64) []uint64 {
	out := make([]uint64, len(xs))
	for i, x := range xs {
		out[i] = math.Float64bits(x)
	}
	return out
}

// fingerprint renders every number of a batch exactly (hex floats).
func fingerprint(b *prepare.Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%+v|", b.Stats)
	for _, a := range b.Actor {
		fmt.Fprintf(&sb, "a%d:%d:%x:%v|", a.NodeID, a.GroupID, a.Weight, a.Diagnostics)
	}
	for _, c := range b.Critic {
		fmt.Fprintf(&sb, "c%d:%x:%q|", c.NodeID, c.Target, c.Context())
	}
	return sb.String()
}
