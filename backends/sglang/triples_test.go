package sglang

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/transport"
)

// viaIterator is the reference reading of a logprob list: readTriples on json-iterator.
func viaIterator(raw string) ([]float64, []uint32, error) {
	iter := transport.JSON.BorrowIterator([]byte(raw))
	defer transport.JSON.ReturnIterator(iter)
	var num transport.NumberReader
	lps, ids := readTriples(iter, "output_token_logprobs", &num)
	return lps, ids, iter.Error
}

func sameFloats(t *testing.T, want, got []float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		assert.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "%s: entry %d", msg, i)
	}
}

func TestScanTriplesMatchesTheIterator(t *testing.T) {
	tests := []struct {
		name, raw string
		scanned   bool // false: the scan declines and json-iterator decides
	}{
		{"empty", `[]`, true},
		{"spaces", " [ [ -0.5 , 12 , null ] , [0,7,null] ] ", true},
		{"null logprob", `[[null,3,null]]`, true},
		{"text element", `[[-1.25,4,"tok"],[-2e-3,5,""]]`, true},
		{"full precision", `[[-0.030459207484708574,349,null],[-3.506557897319982,220,null]]`, true},
		{"largest id", `[[-1,4294967295,null]]`, true},
		{"escaped text", `[[-1,4,"a\"b\u00e9"]]`, true},
		{"fourth element", `[[-1,4,null,0]]`, false},
		{"two elements", `[[-1,4]]`, false},
		{"no id", `[[-0.5]]`, false},
		{"id too large", `[[-1,4294967296,null]]`, false},
		{"leading zero", `[[-01,4,null]]`, false},
		{"bare dot", `[[-.5,4,null]]`, false},
		{"not a list", `{"a":1}`, false},
		{"trailing comma", `[[-1,4,null],]`, false},
		{"truncated", `[[-1,4,null]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lps, ids, ok := scanTriples([]byte(tt.raw), []float64{}, []uint32{})
			require.Equal(t, tt.scanned, ok)
			if !ok {
				return
			}
			wantLps, wantIDs, err := viaIterator(tt.raw)
			require.NoError(t, err)
			sameFloats(t, wantLps, lps, tt.name)
			assert.Equal(t, wantIDs, ids)
		})
	}
}

func TestScanTriplesOnServerShapedLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var b strings.Builder
		b.WriteByte('[')
		for i := range rng.IntN(300) {
			if i > 0 {
				b.WriteByte(',')
			}
			lp := "null"
			if rng.IntN(20) > 0 {
				lp = strconv.FormatFloat(-rng.ExpFloat64()*math.Pow(10, float64(rng.IntN(8)-4)), 'g', -1, 64)
			}
			b.WriteString("[" + lp + "," + strconv.Itoa(rng.IntN(152000)) + ",null]")
		}
		b.WriteByte(']')
		lps, ids, ok := scanTriples([]byte(b.String()), []float64{}, []uint32{})
		require.True(t, ok, b.String())
		wantLps, wantIDs, err := viaIterator(b.String())
		require.NoError(t, err)
		sameFloats(t, wantLps, lps, "random list")
		require.Equal(t, wantIDs, ids)
	}
}

// FuzzScanTriples: whatever the scan accepts, json-iterator reads the same way.
func FuzzScanTriples(f *testing.F) {
	for _, seed := range []string{`[]`, `[[-0.5,12,null]]`, `[[null,3,"x"],[1e-5,0,null]]`, `[[-01,1,null]]`, `[[1,2,3]]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		lps, ids, ok := scanTriples([]byte(raw), nil, nil)
		if !ok {
			return
		}
		wantLps, wantIDs, err := viaIterator(raw)
		if err != nil {
			t.Fatalf("scan accepted %q, json-iterator says %v", raw, err)
		}
		sameFloats(t, wantLps, lps, raw)
		if len(wantIDs) != len(ids) {
			t.Fatalf("%q: %d ids, json-iterator %d", raw, len(ids), len(wantIDs))
		}
		for i := range ids {
			if ids[i] != wantIDs[i] {
				t.Fatalf("%q: id %d is %d, json-iterator %d", raw, i, ids[i], wantIDs[i])
			}
		}
	})
}
