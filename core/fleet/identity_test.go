package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// serving is a replica's startup check that reports id.
func serving(id Identity) Check {
	return func(context.Context) (Checked, error) {
		return Checked{Info: id.Model, Capacity: 4, Model: id.Model, Tokenizer: id.Tokenizer, WeightVersion: id.WeightVersion}, nil
	}
}

func TestStartupCheckComparesFullIdentities(t *testing.T) {
	qwen := Identity{Model: "Qwen/Qwen3-4B", Tokenizer: "Qwen/Qwen3-4B", WeightVersion: "default"}
	for _, tc := range []struct {
		name  string
		a, b  Identity
		allow bool
		want  string // "" when the two agree
	}{
		{"two checkpoints of one run", Identity{Model: "/ckpt/run7/iter_0000100/hf"}, Identity{Model: "/ckpt/run7/iter_0000200/hf"}, false,
			`replica 2 of 2 (b) serves model "/ckpt/run7/iter_0000200/hf", but replica 1 (a) serves model "/ckpt/run7/iter_0000100/hf": the model differs`},
		{"two organisations", Identity{Model: "orgA/Qwen3-4B"}, Identity{Model: "orgB/Qwen3-4B"}, false,
			`serves model "orgB/Qwen3-4B", but replica 1 (a) serves model "orgA/Qwen3-4B"`},
		{"a local copy and the hub name", Identity{Model: "/models/Qwen3-4B"}, Identity{Model: "Qwen/Qwen3-4B"}, false, "the model differs"},
		{"another tokenizer", qwen, Identity{Model: qwen.Model, Tokenizer: "/tok/other", WeightVersion: "default"}, false, "the tokenizer differs"},
		{"another weight version", qwen, Identity{Model: qwen.Model, Tokenizer: qwen.Tokenizer, WeightVersion: "step-20"}, false,
			`serves model "Qwen/Qwen3-4B", weight version "step-20", but replica 1 (a) serves model "Qwen/Qwen3-4B", weight version "default": ` +
				"the weight version differs, and every replica must serve the same model for the whole run (its samples would mix two " +
				"policies in one data set); to collect across weight updates, allow them (allow_weight_change=True, --allow-weight-change)"},
		{"another weight version, allowed", qwen, Identity{Model: qwen.Model, WeightVersion: "step-20"}, true, ""},
		{"one path spelled two ways", Identity{Model: "/models/Qwen3-4B/"}, Identity{Model: "/models/./x/../Qwen3-4B"}, false, ""},
		{"a tokenizer only one reports", qwen, Identity{Model: qwen.Model}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(Config{Replicas: []Replica{
				{Name: "a", Policy: newGated(), Check: serving(tc.a)},
				{Name: "b", Policy: newGated(), Check: serving(tc.b)},
			}, AllowWeightChange: tc.allow})
			require.NoError(t, err)
			_, err = f.StartupCheck(context.Background())
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.a.Model, f.Load().Identity.Model)
				return
			}
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestAnUnknownIdentityIsAWarningGivenOnce(t *testing.T) {
	f, err := New(Config{Replicas: []Replica{
		{Name: "router", Policy: newGated(), Check: serving(Identity{})},
		{Name: "b", Policy: newGated(), Check: serving(Identity{Model: "m", WeightVersion: "v1"})},
	}})
	require.NoError(t, err)
	for k := 0; k < 3; k++ {
		_, err = f.StartupCheck(context.Background())
		require.NoError(t, err)
	}
	l := f.Load()
	require.Len(t, l.Warnings, 1)
	assert.Contains(t, l.Warnings[0], "replica 1 of 2 (router) does not say which model it serves")
	assert.Equal(t, Identity{Model: "m", WeightVersion: "v1"}, l.Identity)
	assert.Equal(t, []string{"v1"}, l.WeightVersions)
}

// flaky is a replica whose server can be taken away (every request unreachable) and
// brought back serving another identity.
type flaky struct {
	down   atomic.Bool
	ident  atomic.Pointer[Identity]
	answer atomic.Pointer[generate.Result]
	calls  atomic.Int64
	checks atomic.Int64
}

type unavailable struct{}

func (unavailable) Error() string     { return "connection refused" }
func (unavailable) Unavailable() bool { return true }

func newFlaky(id Identity) *flaky {
	r := &flaky{}
	r.ident.Store(&id)
	res, _ := good()
	r.answer.Store(res)
	return r
}

func (r *flaky) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	r.calls.Add(1)
	if r.down.Load() {
		return nil, unavailable{}
	}
	res := *r.answer.Load()
	return &res, nil
}

func (r *flaky) check(ctx context.Context) (Checked, error) {
	r.checks.Add(1)
	if r.down.Load() {
		return Checked{}, unavailable{}
	}
	return serving(*r.ident.Load())(ctx)
}

// endCooldowns lets every replica that is down take its probe now.
func endCooldowns(f *Fleet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reps {
		r.downUntil = time.Time{}
	}
}

func TestAReplicaThatComesBackServingAnotherModelIsRefused(t *testing.T) {
	base := Identity{Model: "/ckpt/run7/iter_0000100/hf", Tokenizer: "/ckpt/run7/iter_0000100/hf", WeightVersion: "default"}
	for _, tc := range []struct {
		name string
		back Identity // what the restarted server serves
		want string   // "" when it is taken back
	}{
		{"another checkpoint", Identity{Model: "/ckpt/run7/iter_0000200/hf", Tokenizer: base.Tokenizer, WeightVersion: "default"},
			`replica 1 of 2 (a) came back serving model "/ckpt/run7/iter_0000200/hf", tokenizer "/ckpt/run7/iter_0000100/hf", weight version "default", but replica 1 (a) serves model "/ckpt/run7/iter_0000100/hf"`},
		{"another weight version", Identity{Model: base.Model, Tokenizer: base.Tokenizer, WeightVersion: "7"}, "the weight version differs"},
		{"the same model", base, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newFlaky(base), newFlaky(base)
			f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: a, Check: a.check}, {Name: "b", Policy: b, Check: b.check}},
				Cooldown: time.Hour, Routing: RoundRobin})
			require.NoError(t, err)
			_, err = f.StartupCheck(context.Background())
			require.NoError(t, err)
			a.down.Store(true) // killed
			for tree := uint64(1); tree <= 2; tree++ {
				_, err := f.Generate(context.Background(), generate.Request{Tree: tree})
				require.NoError(t, err, "b serves while a is down")
			}
			require.True(t, f.Load().Replicas[0].Down)
			a.ident.Store(&tc.back) // back on the same port, serving tc.back
			a.down.Store(false)
			endCooldowns(f)
			callsBefore := a.calls.Load()
			for tree := uint64(3); tree <= 8; tree++ {
				_, err := f.Generate(context.Background(), generate.Request{Tree: tree})
				require.NoError(t, err, "a refused replica's requests fail over")
			}
			assert.Equal(t, int64(2), a.checks.Load(), "the probe checked it again, once")
			l := f.Load()
			if tc.want == "" {
				assert.Greater(t, a.calls.Load(), callsBefore, "taken back")
				assert.False(t, l.Replicas[0].Down)
				assert.Empty(t, l.Replicas[0].Refused)
				return
			}
			assert.Equal(t, callsBefore, a.calls.Load(), "no request reached it")
			assert.True(t, l.Replicas[0].Down)
			assert.Contains(t, l.Replicas[0].Refused, tc.want)
			assert.Equal(t, tc.back.Model, l.Replicas[0].Model)
			require.Len(t, l.Warnings, 1)
			assert.Contains(t, l.Warnings[0], tc.want)
		})
	}
}

func TestTheOnlyReplicaComingBackWithAnotherModelFailsItsRequests(t *testing.T) {
	a := newFlaky(Identity{Model: "orgA/Qwen3-4B"})
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: a, Check: a.check}}, Cooldown: time.Hour})
	require.NoError(t, err)
	_, err = f.StartupCheck(context.Background())
	require.NoError(t, err)
	a.down.Store(true)
	_, err = f.Generate(context.Background(), generate.Request{Tree: 1})
	require.Error(t, err)
	a.ident.Store(&Identity{Model: "orgB/Qwen3-4B"})
	a.down.Store(false)
	endCooldowns(f)
	for k := 0; k < 2; k++ {
		_, err = f.Generate(context.Background(), generate.Request{Tree: 2})
		require.Error(t, err)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), `replica 1 of 1 (a) came back serving model "orgB/Qwen3-4B", but replica 1 (a) serves model "orgA/Qwen3-4B"`)
	}
	assert.Equal(t, int64(1), a.calls.Load(), "nothing was sent to it after it came back")
}

func TestAWeightVersionChangeMidRun(t *testing.T) {
	start := Identity{Model: "m", Tokenizer: "m", WeightVersion: "step-10"}
	withVersion := func(v string) *generate.Result {
		res, _ := good()
		res.WeightVersion = v
		return res
	}
	t.Run("refused", func(t *testing.T) {
		a, b := newFlaky(start), newFlaky(start)
		f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: a, Check: a.check}, {Name: "b", Policy: b, Check: b.check}}, Routing: RoundRobin})
		require.NoError(t, err)
		_, err = f.StartupCheck(context.Background())
		require.NoError(t, err)
		a.answer.Store(withVersion("step-20"))
		for tree := uint64(1); tree <= 6; tree++ {
			res, err := f.Generate(context.Background(), generate.Request{Tree: tree})
			require.NoError(t, err)
			assert.Equal(t, "step-10", res.WeightVersion, "every answer kept comes from the run's weights")
		}
		l := f.Load()
		assert.Equal(t, int64(1), a.calls.Load(), "refused at its first answer of another version")
		assert.Contains(t, l.Replicas[0].Refused, `replica 1 of 2 (a) answered with model "m", weight version "step-20", but replica 1 (a) serves model "m", weight version "step-10"`)
		assert.Contains(t, l.Replicas[0].Refused, "--allow-weight-change")
		assert.Equal(t, []string{"step-10"}, l.WeightVersions)
		// When every replica has moved on, the request fails naming both versions.
		b.answer.Store(withVersion("step-20"))
		_, err = f.Generate(context.Background(), generate.Request{Tree: 9})
		require.Error(t, err)
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		assert.Contains(t, err.Error(), "the weight version differs")
	})
	t.Run("allowed", func(t *testing.T) {
		a := newFlaky(start)
		f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: a, Check: a.check}}, AllowWeightChange: true})
		require.NoError(t, err)
		_, err = f.StartupCheck(context.Background())
		require.NoError(t, err)
		res, err := f.Generate(context.Background(), generate.Request{Tree: 1})
		require.NoError(t, err)
		assert.Equal(t, "step-10", res.WeightVersion, "an answer naming no version gets its replica's")
		a.answer.Store(withVersion("step-20"))
		res, err = f.Generate(context.Background(), generate.Request{Tree: 1})
		require.NoError(t, err)
		assert.Equal(t, "step-20", res.WeightVersion)
		l := f.Load()
		assert.Equal(t, []string{"step-10", "step-20"}, l.WeightVersions)
		assert.Equal(t, "step-20", l.Identity.WeightVersion)
		assert.Equal(t, "step-20", l.Replicas[0].WeightVersion)
		assert.Empty(t, l.Replicas[0].Refused)
	})
}
