package tree

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCountTrue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	backing := make([]bool, 200)
	for i := range backing {
		backing[i] = r.IntN(3) == 0
	}
	naive := func(m []bool) int {
		n := 0
		for _, b := range m {
			if b {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name string
		m    []bool
	}{
		{"nil", nil},
		{"one true", []bool{true}},
		{"seven, below one word", backing[:7]},
		{"exactly one word", []bool{true, true, true, true, true, true, true, true}},
		{"all true, more words than one lane can count", func() []bool {
			m := make([]bool, 8*600+5)
			for i := range m {
				m[i] = true
			}
			return m
		}()},
	}
	// Every start offset, so the unaligned head, the words and the tail all
	// take their turn.
	for start := range 9 {
		for _, n := range []int{0, 1, 8, 9, 16, 63, 150} {
			tests = append(tests, struct {
				name string
				m    []bool
			}{"random", backing[start : start+n]})
		}
	}
	for _, tt := range tests {
		assert.Equal(t, naive(tt.m), countTrue(tt.m), "%s (%d values)", tt.name, len(tt.m))
	}
}
