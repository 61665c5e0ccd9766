package prepare_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

// TestCriticFit: the §6.1 tree's sums at kappa 1 (TreeValues.CriticFit, behind the
// per-tree KappaHat): targets a (G 1, n 3), b (G 0, n 1) and s (G 0.5625, n 2), every
// prediction 0.5.
func TestCriticFit(t *testing.T) {
	v, err := prepare.Values(treetest.Figure61(), prepare.DefaultRewardConfig())
	require.NoError(t, err)
	f := v.CriticFit()
	assert.Equal(t, 3.0, f.Nodes)
	assert.InDelta(t, 0.24609375, f.Variance, 1e-12)
	assert.InDelta(t, 0.50390625, f.SquaredError, 1e-12)
	assert.InDelta(t, 1.0/3+1+0.5, f.InverseCount, 1e-12)
	k, ok := f.KappaHat()
	require.True(t, ok)
	assert.InDelta(t, 0.6961326, k, 1e-7)
	vk, _ := v.KappaHat()
	assert.Equal(t, k, vk)
	// kappa_hat reads only ratios: a pool of copies has the same value.
	k2, _ := f.Scaled(2.8).KappaHat()
	assert.InDelta(t, k, k2, 1e-12)
}

// TestTreeCriticFit: what the rule observes is the fit at kappa 0, whatever the batch's
// kappa (docs/signal.md §R.3): s's backup is then (1 + 0)/2 = 0.5.
func TestTreeCriticFit(t *testing.T) {
	for _, kappa := range []float64{0, 1, 64} {
		cfg := prepare.DefaultRewardConfig()
		cfg.CriticWeight = kappa
		f, err := prepare.TreeCriticFit(treetest.Figure61(), cfg)
		require.NoError(t, err)
		assert.Equal(t, prepare.CriticFit{Nodes: 3, Variance: 0.25, SquaredError: 0.5, InverseCount: 1.0/3 + 1 + 0.5}, f)
		k, ok := f.KappaHat()
		require.True(t, ok)
		assert.InDelta(t, 0.72, k, 1e-12)
	}
}

// TestCriticRuleVector is docs/signal.md §R.3's sequence under the default rule.
func TestCriticRuleVector(t *testing.T) {
	r := prepare.DefaultCriticRule()
	require.NoError(t, r.Validate())
	f61, err := prepare.TreeCriticFit(treetest.Figure61(), prepare.DefaultRewardConfig())
	require.NoError(t, err)

	var s prepare.CriticRecord
	c := r.Choose(s, 1)
	assert.Equal(t, prepare.CriticChoice{Estimator: prepare.TreeGroupBaselineName, Kappa: 1}, c, "no batch yet")

	s = r.Observe(s, []prepare.CriticFit{f61, f61})
	c = r.Choose(s, 1)
	assert.False(t, c.Measured, "6 targets < 8")
	assert.Equal(t, prepare.TreeGroupBaselineName, c.Estimator)
	assert.Equal(t, 1.0, c.Kappa)

	s = r.Observe(s, []prepare.CriticFit{f61})
	assert.InDelta(t, 8.4, s.Fit.Nodes, 1e-12, "0.9 * 6 + 3")
	assert.Equal(t, 2, s.Batches)
	c = r.Choose(s, 1)
	assert.True(t, c.Measured)
	assert.Equal(t, prepare.DirectBranchTdName, c.Estimator, "kappa_hat 0.72 >= the threshold 0.5")
	assert.InDelta(t, 0.72, c.Kappa, 1e-12)
	assert.Equal(t, c.KappaHat, c.Kappa)

	s = r.Observe(s, []prepare.CriticFit{{Nodes: 10, Variance: 2.5, SquaredError: 1, InverseCount: 5}})
	c = r.Choose(s, 1)
	assert.InDelta(t, 17.56, c.Nodes, 1e-12)
	assert.InDelta(t, 0.1782460, c.SigmaHat2, 1e-7)
	assert.InDelta(t, 0.0310520, c.TauHat2, 1e-7)
	assert.Equal(t, prepare.DirectBranchTdName, c.Estimator)
	assert.InDelta(t, 5.7402402, c.Kappa, 1e-7)

	// max_kappa caps the kappa, not the estimator's choice.
	capped := r
	capped.MaxKappa = 1
	c = capped.Choose(s, 1)
	assert.Equal(t, prepare.DirectBranchTdName, c.Estimator)
	assert.Equal(t, 1.0, c.Kappa)

	// At the threshold DirectBranchTd (kappa_hat 0.25/0.5); below it TreeGroupBaseline, still
	// at kappa = kappa_hat (0.25/0.75).
	c = r.Choose(r.Observe(prepare.CriticRecord{}, []prepare.CriticFit{{Nodes: 10, Variance: 2.5, SquaredError: 6.25, InverseCount: 5}}), 1)
	assert.Equal(t, prepare.DirectBranchTdName, c.Estimator)
	assert.InDelta(t, 0.5, c.Kappa, 1e-12)
	c = r.Choose(r.Observe(prepare.CriticRecord{}, []prepare.CriticFit{{Nodes: 10, Variance: 2.5, SquaredError: 8.75, InverseCount: 5}}), 1)
	assert.Equal(t, prepare.TreeGroupBaselineName, c.Estimator)
	assert.InDelta(t, 1.0/3, c.Kappa, 1e-12)

	// A batch whose errors are all return noise: tau_hat^2 clips to 0, kappa to 64.
	s2 := r.Observe(prepare.CriticRecord{}, []prepare.CriticFit{{Nodes: 10, Variance: 2.5, SquaredError: 0.25, InverseCount: 5}})
	c = r.Choose(s2, 1)
	assert.Equal(t, prepare.DirectBranchTdName, c.Estimator)
	assert.Equal(t, float64(prepare.MaxCriticWeight), c.Kappa)
}

func TestCriticRuleValidate(t *testing.T) {
	for name, mutate := range map[string]func(*prepare.CriticRule){
		"threshold": func(r *prepare.CriticRule) { r.Threshold = -1 },
		"min_nodes": func(r *prepare.CriticRule) { r.MinNodes = 0 },
		"decay":     func(r *prepare.CriticRule) { r.Decay = 0 },
		"decay>1":   func(r *prepare.CriticRule) { r.Decay = 1.5 },
		"max_kappa": func(r *prepare.CriticRule) { r.MaxKappa = 65 },
	} {
		r := prepare.DefaultCriticRule()
		mutate(&r)
		err := r.Validate()
		require.Error(t, err, name)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err), name)
	}
	assert.Error(t, prepare.CriticRecord{Fit: prepare.CriticFit{Nodes: -1}}.Validate())
}

// TestCriticFitValidate: a fit no batch could have given is refused naming the sum, what
// it is and the bound, never trusted.
func TestCriticFitValidate(t *testing.T) {
	tests := []struct {
		name    string
		fit     prepare.CriticFit
		field   string
		message string
	}{
		{"negative nodes", prepare.CriticFit{Nodes: -1}, "state.fit.nodes", "critic rule: state.fit.nodes is -1; a finite number >= 0 is required"},
		{"NaN variance", prepare.CriticFit{Nodes: 8, Variance: math.NaN()}, "state.fit.variance", "state.fit.variance is NaN; a finite number >= 0 is required"},
		{"infinite error", prepare.CriticFit{Nodes: 8, SquaredError: math.Inf(1)}, "state.fit.squared_error", "state.fit.squared_error is +Inf"},
		{"variance above nodes/4", prepare.CriticFit{Nodes: 8, Variance: 5, SquaredError: 1, InverseCount: 4}, "state.fit.variance",
			"critic rule: state.fit.variance is 5 with nodes 8, an impossible pooled fit; at most nodes/4 = 2 is required (each target adds p(1-p) <= 1/4)"},
		{"inverse count above nodes", prepare.CriticFit{Nodes: 2, Variance: 0.5, InverseCount: 3}, "state.fit.inverse_count",
			"state.fit.inverse_count is 3 with nodes 2, an impossible pooled fit; at most nodes = 2 is required"},
		{"error without targets", prepare.CriticFit{SquaredError: 1}, "state.fit.squared_error", "state.fit.squared_error is 1 with nodes 0, an impossible pooled fit"},
		{"variance without targets", prepare.CriticFit{Variance: 0.1}, "state.fit.variance", "state.fit.variance is 0.1 with nodes 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := prepare.CriticRecord{Fit: tt.fit}.Validate()
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.message)
			assert.Equal(t, tt.field, status.FieldOf(err))
		})
	}
	// The bounds themselves, and a pool decayed many times, are possible fits.
	r := prepare.DefaultCriticRule()
	s := prepare.CriticRecord{}
	for range 50 {
		s = r.Observe(s, []prepare.CriticFit{{Nodes: 3, Variance: 0.75, SquaredError: 0.1, InverseCount: 3}, {Nodes: 1.0 / 3, Variance: 1.0 / 12, InverseCount: 1.0 / 3}})
		require.NoError(t, s.Validate())
	}
	require.NoError(t, prepare.CriticRecord{}.Validate())
	err := prepare.CriticRecord{Batches: -1}.Validate()
	assert.EqualError(t, err, "critic rule: state.batches is -1; an integer >= 0 is required")
}
