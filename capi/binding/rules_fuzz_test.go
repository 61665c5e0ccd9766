package binding_test

import (
	"encoding/json"
	"testing"

	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// FuzzCheck: any input is either refused as InvalidArgument or normalised into a
// config that the owning type validates, and Selective's normal form checks again to itself.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{`{}`, `{"budget": 8, "warmup": 4}`, `{"n": 3}`, `{"tokens": 0}`, `{"value": "NaN"}`,
		`{"budget": 1e30}`, `{"seed": 18446744073709551615}`, `{"min_remaining": null}`, `[`, `{"score": "uniform"}`,
		`{"temperature": -1}`, `{"stop": [""]}`, `{"reward_min": 1, "reward_max": 0}`, `{"truncation": "bootstrap"}`} {
		for _, kind := range []string{binding.KindSelective, binding.KindIndependent, binding.KindSegments, binding.KindAgent, binding.KindConstantCritic, binding.KindMinAbsAdvantage, binding.KindSampling, binding.KindReward} {
			f.Add(kind, []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, kind string, data []byte) {
		out, err := binding.Check(kind, data)
		if err != nil {
			if status.CodeOf(err) != status.InvalidArgument {
				t.Fatalf("Check(%q, %q): %v is not InvalidArgument", kind, data, err)
			}
			return
		}
		if c, ok := out.(prepare.RewardConfig); ok && c.Validate() != nil {
			t.Fatalf("Check(%q, %q) gave an invalid reward config: %v", kind, data, c)
		}
		if p, ok := out.(generate.SamplingParams); ok {
			if _, err := p.Resolve(); err != nil {
				t.Fatalf("Check(%q, %q) gave invalid sampling params: %v", kind, data, err)
			}
		}
		if c, ok := out.(search.Config); ok {
			if err := c.Validate(); err != nil {
				t.Fatalf("Check(%q, %q) gave an invalid search config: %v", kind, data, err)
			}
			if kind == binding.KindSelective {
				again, err := json.Marshal(map[string]any{"budget": c.Budget, "warmup": c.Warmup, "per_pass": c.PerPass,
					"max_children": c.MaxChildren, "min_remaining": c.MinRemaining, "score": c.Score, "seed": c.Seed})
				if err != nil {
					t.Fatal(err)
				}
				if c2, err := binding.Check(kind, again); err != nil || c2 != c {
					t.Fatalf("the normal form %s checks to %v, %v", again, c2, err)
				}
			}
		}
	})
}
