package prepare

import (
	"fmt"
	"math"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// CriticFit holds the sums behind ALGORITHM.md §5.4's kappa_hat over a set of
// critic targets (every checkpoint with a critic prediction and a backup), in
// [reward_min, reward_max]-normalised units. Fits of several trees add, so
// the diagnostic can be pooled over a batch, or over earlier batches
// (docs/signal.md §R).
type CriticFit struct {
	// Nodes is the number of targets (a weighted count once decayed).
	Nodes float64 `json:"nodes"`
	// Variance is Σ p(1-p), p the normalised backup G_bar clipped to [0, 1].
	Variance float64 `json:"variance"`
	// SquaredError is Σ (V_phi - G_bar)^2.
	SquaredError float64 `json:"squared_error"`
	// InverseCount is Σ 1/n_s.
	InverseCount float64 `json:"inverse_count"`
}

// CriticFit returns the tree's sums for kappa_hat.
func (v *TreeValues) CriticFit() CriticFit {
	scale := v.Config.RewardMax - v.Config.RewardMin
	norm := func(x float64) float64 { return (x - v.Config.RewardMin) / scale }
	var f CriticFit
	for id := range v.Tree.Nodes {
		if v.Tree.Nodes[id].Critic == nil || !v.HasBackup(id) {
			continue
		}
		g := norm(v.Backup[id])
		p := min(max(g, 0), 1)
		d := norm(*v.Tree.Nodes[id].Critic) - g
		f.Nodes++
		f.Variance += p * (1 - p)
		f.SquaredError += d * d
		f.InverseCount += 1 / float64(v.Count[id])
	}
	return f
}

// TreeCriticFit returns the sums the critic rule observes for tree t
// (docs/signal.md §R.2): the CriticFit of its values at kappa 0, so that
// each prediction is compared with the tree's own Monte Carlo returns, not
// with backups already blended towards the critic (at kappa >= 1 a constant
// critic would look reliable). cfg's other settings apply.
func TreeCriticFit(t *tree.Tree, cfg RewardConfig) (CriticFit, error) {
	cfg.CriticWeight = 0
	v, err := Values(t, cfg)
	if err != nil {
		return CriticFit{}, err
	}
	return v.CriticFit(), nil
}

// Plus returns the pooled sums of f and g.
func (f CriticFit) Plus(g CriticFit) CriticFit {
	return CriticFit{f.Nodes + g.Nodes, f.Variance + g.Variance, f.SquaredError + g.SquaredError, f.InverseCount + g.InverseCount}
}

// Scaled returns f with every sum multiplied by a.
func (f CriticFit) Scaled(a float64) CriticFit {
	return CriticFit{a * f.Nodes, a * f.Variance, a * f.SquaredError, a * f.InverseCount}
}

// Noise returns sigma_hat^2 = Variance/Nodes and tau_hat^2 =
// max(0, (SquaredError - sigma_hat^2 * InverseCount)/Nodes), the mean of
// (V_phi - G_bar)^2 - sigma_hat^2/n_s clipped at 0. ok is false without
// targets.
func (f CriticFit) Noise() (sigma2, tau2 float64, ok bool) {
	if f.Nodes <= 0 {
		return 0, 0, false
	}
	sigma2 = f.Variance / f.Nodes
	tau2 = max(0, (f.SquaredError-sigma2*f.InverseCount)/f.Nodes)
	return sigma2, tau2, true
}

// KappaHat returns sigma_hat^2/tau_hat^2 (see Noise). ok is false without
// targets or when tau_hat^2 is 0 (the critic's error is not measurable: an
// infinite kappa_hat).
func (f CriticFit) KappaHat() (kappaHat float64, ok bool) {
	sigma2, tau2, ok := f.Noise()
	if !ok || tau2 <= 0 {
		return 0, false
	}
	return sigma2 / tau2, true
}

// The critic rule's defaults (docs/signal.md §R), chosen on the per-token
// benchmark (`make bench-signal`).
const (
	// DefaultCriticThreshold is the pooled kappa_hat at or above which the rule
	// trusts the critic (DirectBranchTd).
	DefaultCriticThreshold = 0.5
	// DefaultCriticMinNodes is the pooled target count below which there is no
	// measurement yet.
	DefaultCriticMinNodes = 8.0
	// DefaultCriticDecay is the weight each earlier batch keeps when a new
	// batch is observed.
	DefaultCriticDecay = 0.9
	// DefaultCriticMaxKappa is the most kappa the rule sets.
	DefaultCriticMaxKappa = MaxCriticWeight
)

// CriticRule picks the next batch's kappa and estimator from the critic's
// measured reliability on earlier batches (docs/signal.md §R). Its zero value
// is not usable: start from DefaultCriticRule.
type CriticRule struct {
	// Threshold: DirectBranchTd when the pooled kappa_hat is at least this,
	// TreeGroupBaseline below it.
	Threshold float64 `json:"threshold"`
	// MinNodes: with fewer pooled targets there is no measurement yet.
	MinNodes float64 `json:"min_nodes"`
	// Decay in (0, 1]: the weight of the earlier batches' sums each time a
	// batch is observed (1: every batch counts alike).
	Decay float64 `json:"decay"`
	// MaxKappa in [0, MaxCriticWeight]: the most kappa the rule sets
	// (kappa = min(kappa_hat, MaxKappa)).
	MaxKappa float64 `json:"max_kappa"`
}

// DefaultCriticRule returns the rule with its defaults.
func DefaultCriticRule() CriticRule {
	return CriticRule{Threshold: DefaultCriticThreshold, MinNodes: DefaultCriticMinNodes, Decay: DefaultCriticDecay, MaxKappa: DefaultCriticMaxKappa}
}

// Validate checks the rule's fields.
func (r CriticRule) Validate() error {
	bad := func(field string, v float64, want string) error {
		return status.Errorf(status.InvalidArgument, "critic rule: %s = %g, want %s", field, v, want)
	}
	switch {
	case math.IsNaN(r.Threshold) || r.Threshold < 0 || math.IsInf(r.Threshold, 0):
		return bad("threshold", r.Threshold, "a finite number >= 0")
	case math.IsNaN(r.MinNodes) || r.MinNodes < 1 || math.IsInf(r.MinNodes, 0):
		return bad("min_nodes", r.MinNodes, "a finite number >= 1")
	case !(r.Decay > 0 && r.Decay <= 1):
		return bad("decay", r.Decay, "0 < decay <= 1")
	case !(r.MaxKappa >= 0 && r.MaxKappa <= MaxCriticWeight):
		return bad("max_kappa", r.MaxKappa, fmt.Sprintf("0 <= max_kappa <= %d", MaxCriticWeight))
	}
	return nil
}

// CriticRecord is the rule's state carried across batches: the decayed pooled
// sums of the batches observed so far.
type CriticRecord struct {
	Fit     CriticFit `json:"fit"`
	Batches int       `json:"batches"`
}

// Validate checks that the record's sums are a fit some batches could have given
// (CriticFit.Validate) and that batches is >= 0.
func (s CriticRecord) Validate() error {
	if err := s.Fit.Validate("state.fit"); err != nil {
		return err
	}
	if s.Batches < 0 {
		return status.FieldErrorf(status.InvalidArgument, "critic rule", "state.batches", "is %d; an integer >= 0 is required", s.Batches)
	}
	return nil
}

// fitSlack is the relative rounding a pooled sum may carry past its bound: the sums are
// added and decayed one by one, each with its own rounding.
const fitSlack = 1e-9

// Validate checks that f is a fit some trees could have given, naming where (its path in
// the caller's input: "state.fit", "batch[2]") in the error. Every sum is finite and >= 0;
// each target adds 1 to nodes, at most 1/4 to variance (p(1-p) with p in [0, 1]) and at
// most 1 to inverse_count (1/n_s with n_s >= 1), so variance <= nodes/4 and
// inverse_count <= nodes; without targets every sum is 0. Decay scales every sum alike,
// so the bounds hold for a pool too. An impossible fit is refused: its kappa_hat means
// nothing, and a variance above nodes/4 would have the rule trust the critic fully.
func (f CriticFit) Validate(where string) error {
	bad := func(field, format string, args ...any) error {
		return status.FieldErrorf(status.InvalidArgument, "critic rule", where+"."+field, format, args...)
	}
	for _, x := range []struct {
		field string
		v     float64
	}{{"nodes", f.Nodes}, {"variance", f.Variance}, {"squared_error", f.SquaredError}, {"inverse_count", f.InverseCount}} {
		if math.IsNaN(x.v) || math.IsInf(x.v, 0) || x.v < 0 {
			return bad(x.field, "is %g; a finite number >= 0 is required", x.v)
		}
	}
	limit := func(bound float64) float64 { return bound * (1 + fitSlack) }
	switch {
	case f.Variance > limit(f.Nodes/4):
		return bad("variance", "is %g with nodes %g, an impossible pooled fit; at most nodes/4 = %g is required (each target adds p(1-p) <= 1/4)",
			f.Variance, f.Nodes, f.Nodes/4)
	case f.InverseCount > limit(f.Nodes):
		return bad("inverse_count", "is %g with nodes %g, an impossible pooled fit; at most nodes = %g is required (each target adds 1/n_s <= 1)",
			f.InverseCount, f.Nodes, f.Nodes)
	case f.Nodes == 0 && f.SquaredError != 0:
		return bad("squared_error", "is %g with nodes 0, an impossible pooled fit; 0 is required without targets", f.SquaredError)
	}
	return nil
}

// Observe returns the record after one more batch: the earlier sums times
// Decay plus the batch's trees' fits.
func (r CriticRule) Observe(s CriticRecord, batch []CriticFit) CriticRecord {
	pooled := s.Fit.Scaled(r.Decay)
	for _, f := range batch {
		pooled = pooled.Plus(f)
	}
	return CriticRecord{Fit: pooled, Batches: s.Batches + 1}
}

// CriticChoice is the rule's decision for the next batch.
type CriticChoice struct {
	// Estimator is DirectBranchTdName or TreeGroupBaselineName.
	Estimator string `json:"estimator"`
	// Kappa is the next batch's RewardConfig.CriticWeight.
	Kappa float64 `json:"kappa"`
	// Measured is false while fewer than MinNodes targets are pooled.
	Measured bool `json:"measured"`
	// KappaHat is the pooled kappa_hat (MaxCriticWeight when tau_hat^2 is 0;
	// 0 without a measurement), TauHat2 and SigmaHat2 its parts.
	KappaHat  float64 `json:"kappa_hat"`
	TauHat2   float64 `json:"tau_hat2"`
	SigmaHat2 float64 `json:"sigma_hat2"`
	// Nodes is the pooled (decayed) target count.
	Nodes float64 `json:"nodes"`
}

// Choose returns the next batch's estimator and kappa: without a measurement
// TreeGroupBaseline at baseKappa (the user's critic_weight); with one, kappa =
// min(kappa_hat, MaxKappa) (so in [0, MaxCriticWeight]), and DirectBranchTd when
// kappa_hat >= Threshold, else TreeGroupBaseline.
func (r CriticRule) Choose(s CriticRecord, baseKappa float64) CriticChoice {
	c := CriticChoice{Estimator: TreeGroupBaselineName, Kappa: baseKappa, Nodes: s.Fit.Nodes}
	sigma2, tau2, ok := s.Fit.Noise()
	if !ok || s.Fit.Nodes < r.MinNodes {
		return c
	}
	c.Measured, c.SigmaHat2, c.TauHat2 = true, sigma2, tau2
	c.KappaHat = MaxCriticWeight
	if tau2 > 0 {
		c.KappaHat = min(sigma2/tau2, MaxCriticWeight)
	}
	c.Kappa = min(c.KappaHat, r.MaxKappa)
	if c.KappaHat >= r.Threshold {
		c.Estimator = DirectBranchTdName
	}
	return c
}

// String renders the choice for logs.
func (c CriticChoice) String() string {
	if !c.Measured {
		return fmt.Sprintf("%s at kappa %g (no measurement yet, %g targets)", c.Estimator, c.Kappa, c.Nodes)
	}
	return fmt.Sprintf("%s at kappa %.4g (kappa_hat %.4g over %.4g targets)", c.Estimator, c.Kappa, c.KappaHat, c.Nodes)
}
