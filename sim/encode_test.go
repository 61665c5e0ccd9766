package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSglReplyMatchesReflection compares the hand-written /generate encoder with
// jsoniter's reflective encoding over random items: every finish reason, texts with HTML,
// control characters, U+2028 and invalid UTF-8, logprobs present or not, top logprobs
// with gaps, floats across formatting thresholds, batches.
func TestSglReplyMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pieces := []string{"a", "<", ">", "&", "\"", "\\", "\n", "\t", "\x01", "\x7f", "\u2028", "\u2029", "é", "日本", "\xff", "\xe2\x82", "{", "\\u00", "</think>", " "}
	text := func() string {
		s := ""
		for n := rng.Intn(12); n > 0; n-- {
			s += pieces[rng.Intn(len(pieces))]
		}
		return s
	}
	floats := []float64{0, -0.5, 1e-7, -1e-7, 1e-6, 123456.789, 1e21, 1e20, -9999, 3.0000000000000004, 2.5e-5, 0.123456789012345678}
	float := func() float64 {
		if rng.Intn(3) == 0 {
			return floats[rng.Intn(len(floats))]
		}
		return math.Log(rng.Float64())
	}
	trip := func(n int, withText bool) triples {
		tr := triples{}
		for i := 0; i < n; i++ {
			tr.lps = append(tr.lps, float())
			tr.ids = append(tr.ids, uint32(rng.Intn(3000)))
			if withText {
				tr.texts = append(tr.texts, text())
			}
		}
		if n == 0 {
			tr.ids, tr.lps = []uint32{}, []float64{}
		}
		return tr
	}
	item := func() sglItem {
		n := rng.Intn(6)
		it := sglItem{Text: text(), MetaInfo: sglMeta{ID: text(), PromptTokens: rng.Intn(5000), CompletionTokens: n,
			CachedTokens: rng.Intn(100), WeightVersion: "default", E2ELatency: math.Abs(float())}}
		for i := 0; i < n; i++ {
			it.OutputIDs = append(it.OutputIDs, uint32(rng.Intn(1<<20)))
		}
		if rng.Intn(4) > 0 && it.OutputIDs == nil {
			it.OutputIDs = []uint32{}
		}
		switch rng.Intn(5) {
		case 0:
			it.MetaInfo.FinishReason = finishAbort{Type: "abort", Message: text()}
		case 1:
			it.MetaInfo.FinishReason = finishLength{Type: "length", Length: n}
		case 2:
			it.MetaInfo.FinishReason = finishStop{Type: "stop", Matched: text()}
		default:
			it.MetaInfo.FinishReason = finishStop{Type: "stop", Matched: int64(rng.Intn(3000))}
		}
		if rng.Intn(3) > 0 {
			withText := rng.Intn(2) == 0
			tr := trip(n, withText)
			it.MetaInfo.OutputTokenLogprobs = &tr
			tops := make([]any, n)
			for p := range tops {
				if rng.Intn(2) == 0 {
					tops[p] = trip(rng.Intn(4), withText)
				}
			}
			it.MetaInfo.OutputTopLogprobs = tops
		}
		return it
	}
	for i := 0; i < 3000; i++ {
		items := []sglItem{item()}
		for rng.Intn(3) == 0 {
			items = append(items, item())
		}
		single := len(items) == 1 && rng.Intn(2) == 0
		var want reply
		if single {
			want = jsonReply(200, items[0])
		} else {
			want = jsonReply(200, items)
		}
		got := sglReply(items, single)
		require.Equal(t, want.status, got.status)
		require.Equal(t, string(want.body), string(got.body), fmt.Sprintf("case %d", i))
	}
}

// BenchmarkGenerateHandler runs the engine's /generate requests recorded in the golden
// file (verbosity 3, deep prefixes, 256-token segments) through the handler without HTTP:
// the server's own cost per request.
func BenchmarkGenerateHandler(b *testing.B) {
	var bodies [][]byte
	for _, r := range readGolden(b) {
		if r.Server == "bench" && r.Path == "/generate" && bytes.Contains(r.Body, []byte(`"rid"`)) {
			bodies = append(bodies, r.Body)
		}
	}
	require.NotEmpty(b, bodies)
	s := startSim(b, Config{Verbosity: 3})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := s.generateHandler(bodies[i%len(bodies)], nil, 0); r.status != 200 {
			b.Fatalf("status %d: %s", r.status, r.body)
		}
	}
}
