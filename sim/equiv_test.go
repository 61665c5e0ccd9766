package sim

import (
	"math"
	"math/rand"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// matchByProbing is the first vocab.match: probe the index at every length, longest first.
func matchByProbing(v *vocab, r string) (int64, int64) {
	g, alt := int64(-1), int64(-1)
	for l := min(v.maxLen, len(r)); l >= 1; l-- {
		if id, ok := v.index[r[:l]]; ok {
			if g < 0 {
				g = int64(id)
			} else {
				alt = int64(id)
				break
			}
		}
	}
	return g, alt
}

// TestVocabMatchTrie checks the trie against probing at every offset of the model's own
// text (where it is used) and of text with bytes it never writes.
func TestVocabMatchTrie(t *testing.T) {
	s := startSim(t, Config{})
	v := s.model.v
	texts := append(trainingCorpus(), "\x00\xff\xfe<|im_end|><tool_call>\n{}", "日本語のテキスト", "")
	n := 0
	for _, text := range texts {
		for off := 0; off <= len(text); off++ {
			g, alt := matchByProbing(v, text[off:])
			gotG, gotAlt := v.match(text[off:])
			require.Equal(t, [2]int64{g, alt}, [2]int64{gotG, gotAlt}, "%q at %d", text, off)
			n++
		}
	}
	require.Greater(t, n, 10000)
}

// TestCursorRunMatchesBytes feeds the model's own output (and text it never writes) to
// one cursor in runs and to another byte by byte: positions, weights (bit for bit) and
// flags must agree after every token.
func TestCursorRunMatchesBytes(t *testing.T) {
	s := startSim(t, Config{})
	for verb := 0; verb <= MaxVerbosity; verb++ {
		m := &model{v: s.model.v, verb: verb, think: verb == 1}
		for pi, p := range Problems()[:12] {
			prompt := chatPrompt(t, s, p.Prompt)
			res := m.generate(prompt, sampling{maxTokens: 400, temperature: 1.2, topP: 1, topK: -1, seed: uint64(pi)}, toolMode{})
			pb := m.v.appendBytes(nil, prompt, false)
			a, _ := m.start(pb, toolMode{})
			b, _ := m.start(pb, toolMode{})
			chunks := [][]byte{}
			for _, id := range res.ids {
				chunks = append(chunks, m.v.tokens[id])
			}
			chunks = append(chunks, []byte("\n\nsomething else entirely"), []byte("Therefore, the answer"))
			for ci, ch := range chunks {
				a.feed(ch)
				for _, x := range ch {
					b.feedByte(x)
				}
				require.Equal(t, [2]bool{b.started, b.wrapped}, [2]bool{a.started, a.wrapped})
				require.Equal(t, len(b.pos), len(a.pos), "verbosity %d problem %d chunk %d", verb, pi, ci)
				for i := range a.pos {
					pa, pb := a.pos[i], b.pos[i]
					require.True(t, pa.text == pb.text && pa.off == pb.off && pa.next == pb.next && pa.eos == pb.eos &&
						math.Float64bits(pa.w) == math.Float64bits(pb.w), "verbosity %d problem %d chunk %d position %d", verb, pi, ci, i)
				}
			}
		}
	}
}

// TestMemoTablesMatchFunctions checks the per-sequence memo tables against the functions
// they remember, with enough distinct values to collide.
func TestMemoTablesMatchFunctions(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var mm mathMemo
	var ft floatText
	vals := []float64{0, 1, 0.97, 0.03, 1e-300, 5e-324, math.SmallestNonzeroFloat64, -0.0, 1e300}
	for i := 0; i < 500; i++ {
		vals = append(vals, rng.Float64(), rng.Float64()*1e-9, math.Log(rng.Float64()))
	}
	for _, temp := range []float64{1, 0.7, 1.3} {
		mm = mathMemo{}
		for round := 0; round < 3; round++ {
			for _, x := range vals {
				if x > 0 {
					require.Equal(t, math.Float64bits(math.Exp(math.Log(x)/temp)), math.Float64bits(mm.temper(x, temp)), "%v", x)
				}
				require.Equal(t, math.Float64bits(clampLog(x)), math.Float64bits(mm.clampLog(x)), "%v", x)
				require.Equal(t, string(strconv.AppendFloat([]byte("x"), x, 'g', -1, 64)), string(ft.append([]byte("x"), x)))
			}
		}
	}
}

// TestSharedTreeConcurrent generates from many goroutines on one model (so requests race
// to grow and read the shared script tree) and compares every sequence with the same
// request run alone on a model of its own.
func TestSharedTreeConcurrent(t *testing.T) {
	s := startSim(t, Config{})
	type job struct {
		prompt []uint32
		sp     sampling
	}
	var jobs []job
	for pi, p := range Problems()[:16] {
		prompt := chatPrompt(t, s, p.Prompt)
		for seed := 0; seed < 4; seed++ {
			sp := sampling{maxTokens: 256, temperature: 1, topP: 1, topK: -1, seed: uint64(100*pi + seed)}
			jobs = append(jobs, job{prompt, sp})
			first := (&model{v: s.model.v, verb: 3}).generate(prompt, sp, toolMode{})
			jobs = append(jobs, job{concat(prompt, first.ids[:len(first.ids)/2]), sp})
		}
	}
	want := make([]genResult, len(jobs))
	for i, j := range jobs {
		want[i] = (&model{v: s.model.v, verb: 3}).generate(j.prompt, j.sp, toolMode{})
	}
	shared := &model{v: s.model.v, verb: 3}
	got := make([]genResult, len(jobs))
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(jobs); i += 8 {
				got[i] = shared.generate(jobs[i].prompt, jobs[i].sp, toolMode{})
			}
		}()
	}
	wg.Wait()
	for i := range jobs {
		require.Equal(t, want[i], got[i], "job %d", i)
	}
}
