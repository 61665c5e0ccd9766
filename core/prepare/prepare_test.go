package prepare_test

import (
	"errors"
	"math"
	"sort"
	"testing"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func TestPrepareBadInput(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(tr *tree.Tree, cfg *prepare.RewardConfig)
		node   int
		field  string
	}{
		{"reward above range", func(tr *tree.Tree, _ *prepare.RewardConfig) { tr.Nodes[4].Reward = 1.5 }, 4, "reward"},
		{"reward below custom range", func(_ *tree.Tree, cfg *prepare.RewardConfig) { cfg.RewardMin = 0.5 }, 1, "reward"},
		{"nan reward", func(tr *tree.Tree, _ *prepare.RewardConfig) { tr.Nodes[6].Reward = math.NaN() }, 6, "reward"},
		{"cycle", func(tr *tree.Tree, _ *prepare.RewardConfig) {
			tr.Nodes[0].Children = []int{2}
			tr.Nodes[1].Parent = 3
			tr.Nodes[3].Children = []int{1}
			tr.Nodes[3].Done = false
		}, 1, "parent"},
		{"missing parent", func(tr *tree.Tree, _ *prepare.RewardConfig) { tr.Nodes[5].Parent = -1 }, 5, "parent"},
		{"mismatched lengths", func(tr *tree.Tree, _ *prepare.RewardConfig) { tr.Nodes[1].Spans[0].Logprobs = nil }, 1, "spans[0].logprobs"},
		{"cancelled node without critic", func(tr *tree.Tree, _ *prepare.RewardConfig) {
			id, _ := tr.AddChild(2, tree.Node{})
			tr.Nodes[id].Critic = nil
		}, 7, "critic"},
		{"bootstrap truncation without critic", func(tr *tree.Tree, cfg *prepare.RewardConfig) {
			cfg.Truncation = prepare.TruncationBootstrap
			tr.Nodes[6].Done, tr.Nodes[6].Truncated = false, true
		}, 6, "critic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, cfg := treetest.Figure61(), prepare.DefaultRewardConfig()
			tc.break_(tr, &cfg)
			_, err := prepare.Prepare(tr, cfg, prepare.DirectBranchTd{})
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			var ve *tree.ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			assert.Equal(t, tc.node, ve.NodeID, err.Error())
			assert.Equal(t, tc.field, ve.Field, err.Error())
		})
	}
}

// TestPrepareSpanCheckOnEntry pins down where the per-token span checks
// happen. A tree built as a literal has no record of any check, so Prepare
// reads every span and rejects a bad one. A tree grown by AddChild had its
// spans checked on entry and Prepare does not read them again: writing into a
// checked array after insertion (which the tree package forbids) is seen by
// Validate only, the observable proof that the tokens are not re-read.
func TestPrepareSpanCheckOnEntry(t *testing.T) {
	nan := func(tr *tree.Tree) *tree.Tree {
		tr.Nodes[4].Spans[0].Logprobs[0] = math.NaN()
		return tr
	}
	fig := func() *tree.Tree { return treetest.Figure61() }
	literal := func() *tree.Tree {
		g := fig()
		return &tree.Tree{ProblemID: g.ProblemID, Nodes: g.Nodes, Stats: g.Stats}
	}
	tests := []struct {
		name  string
		tree  *tree.Tree
		field string // "" = accepted
	}{
		{"literal tree", literal(), ""},
		{"literal tree with a bad span", nan(literal()), "spans[0].logprobs[0]"},
		{"grown tree", fig(), ""},
		{"grown tree with a replaced bad span", func() *tree.Tree {
			tr := fig()
			tr.Nodes[4].Spans = []tree.PackedSequence{{Tokens: []uint32{30}, Trainable: []bool{true}, Logprobs: []float64{math.NaN()}}}
			return tr
		}(), "spans[0].logprobs[0]"},
		{"grown tree written in place", nan(fig()), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepare.Prepare(tc.tree, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			var ve *tree.ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			assert.Equal(t, 4, ve.NodeID, err.Error())
			assert.Equal(t, tc.field, ve.Field, err.Error())
		})
	}
	assert.Error(t, nan(fig()).Validate(), "Validate still reads every token")
}

func TestRewardConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(c *prepare.RewardConfig)
		field string
	}{
		{"default", func(*prepare.RewardConfig) {}, ""},
		{"kappa 64", func(c *prepare.RewardConfig) { c.CriticWeight = 64 }, ""},
		{"overlong penalty", func(c *prepare.RewardConfig) { c.TruncatedReward = -1 }, ""},
		{"kappa too large", func(c *prepare.RewardConfig) { c.CriticWeight = 65 }, "critic_weight"},
		{"kappa negative", func(c *prepare.RewardConfig) { c.CriticWeight = -1 }, "critic_weight"},
		{"gamma zero", func(c *prepare.RewardConfig) { c.Gamma = 0 }, "gamma"},
		{"gamma above one", func(c *prepare.RewardConfig) { c.Gamma = 1.01 }, "gamma"},
		{"empty range", func(c *prepare.RewardConfig) { c.RewardMin = 1 }, "reward_min"},
		{"nan", func(c *prepare.RewardConfig) { c.RewardMax = math.NaN() }, "reward_max"},
		{"truncation", func(c *prepare.RewardConfig) { c.Truncation = "clip" }, "truncation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := prepare.DefaultRewardConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ce *status.FieldError
			require.True(t, errors.As(err, &ce), "got %v", err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Equal(t, tc.field, ce.Field)
			assert.Equal(t, "prepare: reward config "+tc.field+": "+ce.Reason, err.Error())
			_, err = prepare.Prepare(treetest.Figure61(), c, nil)
			assert.ErrorAs(t, err, &ce)
		})
	}
}

func TestStatsAndFailures(t *testing.T) {
	tr := treetest.Figure61()
	f, err := tr.AddChild(2, tree.Node{Failed: "verifier error", Spans: []tree.PackedSequence{gen(1, 2, 3)}})
	require.NoError(t, err)
	tr.Stats = tree.Stats{Rollouts: 9, BudgetUnspent: 2, PrefixTokensReused: 5, WallSeconds: 1.5, PolicySeconds: 0.5}
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	assert.Equal(t, []prepare.Failure{{NodeID: f, Message: "verifier error"}}, b.Failures)
	require.Len(t, b.Actor, 6, "the failed edge yields no sample")
	mean, sq := 0.0, 0.0
	for _, a := range b.Actor {
		mean += a.Weight / 6
	}
	for _, a := range b.Actor {
		sq += (a.Weight - mean) * (a.Weight - mean) / 6
	}
	assert.Equal(t, prepare.Stats{
		Rollouts: 9, Nodes: 8, GeneratedTokens: 10, PrefixTokensReused: 5, BudgetUnspent: 2,
		AdvantageMean: b.Stats.AdvantageMean, AdvantageStd: b.Stats.AdvantageStd,
		Failures: 1, WallSeconds: 1.5, PolicySeconds: 0.5,
	}, b.Stats)
	assert.InDelta(t, mean, b.Stats.AdvantageMean, 1e-15)
	assert.InDelta(t, math.Sqrt(sq), b.Stats.AdvantageStd, 1e-15)
	assert.Equal(t, "fig61", b.ProblemID)
	assert.Equal(t, 6+3, b.Len())

	data, err := jsoniter.Marshal(b.Stats)
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, jsoniter.Unmarshal(data, &keys))
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"advantage_mean", "advantage_std", "budget_unspent", "failures", "generated_tokens",
		"nodes", "policy_seconds", "prefix_tokens_reused", "rollouts", "wall_seconds"}, names)

	critic, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), nil)
	require.NoError(t, err)
	assert.Empty(t, critic.Actor, "no estimator: critic targets only")
	assert.Len(t, critic.Critic, 3)
}

func TestAllFailedPromptContributesNothing(t *testing.T) {
	tr := tree.New("p", cond(1), "q")
	_, err := tr.AddChild(0, tree.Node{Failed: "timeout", Done: true})
	require.NoError(t, err)
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	assert.Empty(t, b.Actor)
	assert.Empty(t, b.Critic)
	assert.Len(t, b.Failures, 1)
	v, err := prepare.Values(tr, prepare.DefaultRewardConfig())
	require.NoError(t, err)
	assert.False(t, v.HasRefined(0), "an unscored root with no completed child has no value")
}

// TestActorSampleSpans checks the span materialisation of a multi-span edge:
// each generated span becomes the full context up to and including it,
// trainable only on its own generated tokens, log-probabilities zero elsewhere.
func TestActorSampleSpans(t *testing.T) {
	tr := tree.New("p", cond(1, 2), "q")
	a, err := tr.AddChild(0, tree.Node{Spans: []tree.PackedSequence{gen(3, 4)}, Critic: ptr(0.5)})
	require.NoError(t, err)
	glueThenGen := cond(6).AppendGenerated(gen(7))
	_, err = tr.AddChild(a, tree.Node{Done: true, Reward: 1, Spans: []tree.PackedSequence{
		cond(5), gen(8, 9), glueThenGen, cond(10),
	}})
	require.NoError(t, err)
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	leaf := b.Actor[1]
	require.Equal(t, 2, leaf.NumSpans(), "spans without generated tokens give no record")
	assert.Equal(t, 3, leaf.EdgeTokens())
	spans := leaf.Spans()
	assert.Equal(t, tree.PackedSequence{
		Tokens:    []uint32{1, 2, 3, 4, 5, 8, 9},
		Trainable: []bool{false, false, false, false, false, true, true},
		Logprobs:  []float64{0, 0, 0, 0, 0, -0.25, -0.5},
	}, spans[0])
	assert.Equal(t, tree.PackedSequence{
		Tokens:    []uint32{1, 2, 3, 4, 5, 8, 9, 6, 7},
		Trainable: []bool{false, false, false, false, false, false, false, false, true},
		Logprobs:  []float64{0, 0, 0, 0, 0, 0, 0, 0, -0.25},
	}, spans[1])
	for i := range spans {
		assert.Equal(t, len(spans[i].Tokens), leaf.SpanLen(i))
	}
	assert.Equal(t, 1, b.Actor[0].NumSpans())
	assert.Equal(t, []uint32{1, 2, 3, 4}, b.Actor[0].Span(0).Tokens)

	explicit := prepare.NewActorSample(1, 0, "DirectBranchTd", 0.4, []tree.PackedSequence{{
		Tokens: []uint32{10, 20}, Trainable: []bool{false, true}, Logprobs: []float64{-9, -0.5},
	}})
	assert.Equal(t, prepare.NoSearchPass, explicit.SearchPass)
	assert.Equal(t, 1, explicit.NumSpans())
	assert.Equal(t, 1, explicit.EdgeTokens())
	assert.Equal(t, []float64{0, -0.5}, explicit.Span(0).Logprobs, "logprobs only where generated")
}

func TestDiagnostics(t *testing.T) {
	b, err := prepare.Prepare(treetest.Figure61(), prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	d := b.Actor[0].Diagnostics
	v, ok := d.Get("v_star_child")
	assert.True(t, ok)
	assert.Equal(t, 0.875, v)
	_, ok = d.Get("nope")
	assert.False(t, ok)
	assert.Equal(t, map[string]float64{"reward": 0, "v_star_parent": d.At(1).Value, "v_star_child": 0.875, "n_s": 2}, d.Map())
	assert.Equal(t, []string{"reward", "v_star_parent", "v_star_child", "n_s"}, d.Names())
	assert.Equal(t, 4, d.Len())
	data, err := d.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, `{"reward":0,"v_star_parent":0.5416666666666666,"v_star_child":0.875,"n_s":2}`, string(data))
	// Samples share one list of names and one matrix of values, but a caller
	// can change neither through the accessors.
	next := b.Actor[1].Diagnostics
	assert.True(t, d.SameNames(next))
	d.Names()[0] = "changed"
	d.Values()[0] = 99
	assert.Equal(t, prepare.Diagnostic{Name: "reward", Value: 0}, d.At(0))
	assert.Equal(t, append(d.Values(), next.Values()...), next.AppendValues(d.AppendValues(nil)))
	assert.False(t, d.SameNames(prepare.DiagnosticsOf(prepare.Diagnostic{Name: "reward", Value: 0})))
	assert.True(t, d.SameNames(prepare.DiagnosticsOf(d.At(0), d.At(1), d.At(2), d.At(3))))
	assert.Equal(t, "reward=0 v_star_parent=0.5416666666666666 v_star_child=0.875 n_s=2", d.String())
	assert.Equal(t, 0, prepare.Diagnostics{}.Len())
}

func TestBatchJSON(t *testing.T) {
	b, err := prepare.Prepare(treetest.Figure61(), prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	data, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(b)
	require.NoError(t, err)
	doc := string(data)
	for _, want := range []string{`"problem_id":"fig61"`, `"actor":[{"node_id":1,"group_id":0,"estimator":"DirectBranchTd","weight":0.33333333333333337,"diagnostics":{"reward":0,`,
		`"critic":[{"node_id":0,"context":"s","target":0.5625,"diagnostics":{"v_hat":0.5,"v_star":0.5416666666666666,"n_s":2}}`,
		`"reward_config":{"gamma":1,"critic_weight":1,"reward_min":0,"reward_max":1,"truncated_reward":0,"truncation":"terminal"}`,
		`"failures":null`} {
		assert.Contains(t, doc, want)
	}
	var back struct {
		Critic []prepare.CriticSample `json:"critic"`
	}
	require.NoError(t, jsoniter.Unmarshal(data, &back))
	again, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(back.Critic)
	require.NoError(t, err)
	first, err := jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(b.Critic)
	require.NoError(t, err)
	assert.JSONEq(t, string(first), string(again), "contexts and diagnostics keep their order through JSON")
	assert.Equal(t, b.Critic[0].Diagnostics, back.Critic[0].Diagnostics)

	var d prepare.Diagnostics
	assert.Error(t, jsoniter.Unmarshal([]byte(`{"a":"x"}`), &d))
}

func TestPreparedSamplesMatchTheirTree(t *testing.T) {
	tr := treetest.Search(32, 4, 16, 5)
	b, err := prepare.Prepare(tr, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	require.NoError(t, err)
	require.NotEmpty(t, b.Critic)
	for _, c := range b.Critic {
		want := tr.ContextText(c.NodeID)
		assert.Equal(t, want, c.Context(), "node %d", c.NodeID)
		assert.Equal(t, len(want), c.ContextLen())
		assert.Equal(t, "x"+want, string(c.AppendContext([]byte("x"))))
	}
	explicit := prepare.NewCriticSample(3, "ctx", 0.5, prepare.Diagnostics{})
	assert.Equal(t, "ctx", explicit.Context())
	assert.Equal(t, 3, explicit.ContextLen())
	assert.Equal(t, "> ctx", string(explicit.AppendContext([]byte("> "))))

	// Prepare counts each edge's generated tokens and spans once; the counts
	// match a sample that reads them from the tree.
	generated := 0
	for _, a := range b.Actor {
		fresh := prepare.EdgeSample(tr, a.NodeID, a.Estimator, a.Weight, a.Diagnostics)
		assert.Equal(t, fresh.NumSpans(), a.NumSpans(), "node %d", a.NodeID)
		assert.Equal(t, fresh.EdgeTokens(), a.EdgeTokens(), "node %d", a.NodeID)
		assert.Equal(t, tr.Nodes[a.NodeID].GeneratedTokens(), a.EdgeTokens())
		generated += a.EdgeTokens()
	}
	assert.Equal(t, max(tr.Stats.GeneratedTokens, generated), b.Stats.GeneratedTokens)
}
