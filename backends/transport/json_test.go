package transport

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reader must give strconv.ParseFloat's correctly rounded value, bit for bit.
func TestNumberReaderIsExact(t *testing.T) {
	tests := []struct{ name, in string }{
		{"zero", "0"},
		{"negative zero", "-0"},
		{"full precision", "-0.030459207484708574"},
		{"more digits than float64 holds", "-3.50655789731998212345678"},
		{"exponent", "-1.5e-07"},
		{"integer", "-17"},
		{"subnormal", "4.9e-324"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iter := JSON.BorrowIterator([]byte("[" + tt.in + "]"))
			defer JSON.ReturnIterator(iter)
			var r NumberReader
			require.True(t, iter.ReadArray())
			got := r.Float64(iter)
			require.NoError(t, iter.Error)
			want, err := strconv.ParseFloat(tt.in, 64)
			require.NoError(t, err)
			assert.Equal(t, math.Float64bits(want), math.Float64bits(got))
		})
	}
}

func TestNumberReaderMatchesParseFloatOnRandomLogprobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r NumberReader // one reader for many numbers, as a reply parser uses it
	for range 10000 {
		want := -rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
		text := strconv.FormatFloat(want, 'g', -1, 64)
		iter := JSON.BorrowIterator([]byte(text + " "))
		got := r.Float64(iter)
		require.NoError(t, iter.Error, text)
		require.Equal(t, math.Float64bits(want), math.Float64bits(got), text)
		JSON.ReturnIterator(iter)
	}
}

func TestNumberReaderRejectsNonNumbers(t *testing.T) {
	for _, in := range []string{`"1.5"`, `null`, `true`, `[1]`, `{}`, `-`, `1e`} {
		t.Run(in, func(t *testing.T) {
			iter := JSON.BorrowIterator([]byte(in))
			defer JSON.ReturnIterator(iter)
			var r NumberReader
			r.Float64(iter)
			assert.Error(t, iter.Error)
		})
	}
}
