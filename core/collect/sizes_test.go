package collect

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// Sizes past what a machine holds are refused by Validate, before Run allocates anything
// for them (a warmup of 2^40 launches used to be allocated whole, and the process died).
func TestHugeSizesAreRefusedBeforeAnyAllocation(t *testing.T) {
	huge := []int{search.MaxBudget + 1, 1 << 31, 1 << 40, 1 << 62}
	for _, n := range huge {
		for name, edit := range map[string]func(*Config){
			"budget and warmup": func(c *Config) { c.Search = search.Selective(n, n) },
			"independent":       func(c *Config) { c.Search = search.Independent(n) },
			"per_pass":          func(c *Config) { c.Search.PerPass = n },
			"max_children":      func(c *Config) { c.Search.MaxChildren = n },
			"min_remaining":     func(c *Config) { c.Search.MinRemaining = n + search.MaxTokens },
			"segments":          func(c *Config) { c.Segments = n + search.MaxTokens },
			"max_total_tokens":  func(c *Config) { c.MaxTotalTokens = n + search.MaxTokens },
			"max_segments":      func(c *Config) { c.MaxSegments = n + search.MaxTokens },
		} {
			cfg := baseConfig(search.Selective(8, 4))
			edit(&cfg)
			_, err := Run(context.Background(), cfg, newPolicy(256), newFakeEnv(), nil)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err), "%s %d: %v", name, n, err)
		}
	}
}
