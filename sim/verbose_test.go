package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/focus-go/focus-go/core/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func problemByID(t testing.TB, id string) Problem {
	t.Helper()
	for _, p := range Problems() {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("no bundled problem %q", id)
	return Problem{}
}

// sampled is one completion of a batch.
type sampled struct {
	ids    []uint32
	text   string
	finish string
}

// sampleBatch draws n completions of prompt in one /generate batch, seeds seed..seed+n-1.
func sampleBatch(t testing.TB, s *Server, prompt []uint32, n, seed int, params map[string]any) []sampled {
	t.Helper()
	prompts := make([][]uint32, n)
	ps := make([]map[string]any, n)
	for i := range prompts {
		prompts[i] = prompt
		ps[i] = map[string]any{"sampling_seed": seed + i}
		for k, v := range params {
			ps[i][k] = v
		}
	}
	code, v := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": prompts, "sampling_params": ps})
	require.Equal(t, 200, code, "%v", v)
	var out []sampled
	for _, it := range arr(v) {
		o := obj(it)
		out = append(out, sampled{ids: ids(o["output_ids"]), text: o["text"].(string),
			finish: obj(obj(o["meta_info"])["finish_reason"])["type"].(string)})
	}
	return out
}

func medianLen(xs []sampled) int {
	ls := make([]int, len(xs))
	for i, x := range xs {
		ls[i] = len(x.ids)
	}
	sort.Ints(ls)
	return ls[len(ls)/2]
}

func TestVerbosityConfig(t *testing.T) {
	var cfg Config
	require.NoError(t, json.Unmarshal([]byte(`{"verbosity": 3}`), &cfg))
	assert.Equal(t, 3, cfg.Verbosity)
	for _, v := range []int{-1, MaxVerbosity + 1} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			_, err := Start(Config{Verbosity: v})
			assert.ErrorContains(t, err, fmt.Sprintf("verbosity %d: want 0 (terse) to %d", v, MaxVerbosity))
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
		})
	}
}

func TestVerboseSolutionLength(t *testing.T) {
	t.Parallel() // seconds of pure computation; overlaps the suite's sleeping latency tests
	servers := make([]*Server, MaxVerbosity+1)
	for v := range servers {
		servers[v] = startSim(t, Config{Verbosity: v})
	}
	// Medians at level 3 over 50 samples with the generated tokenizer, temperature 1.
	tests := []struct {
		id       string
		min, max int
	}{
		{"linear-3-7-22", 600, 1000},
		{"arith-34-56-78", 800, 1300},
		{"series-365", 800, 1300},
		{"change-17-13-500", 800, 1300},
		{"system-153-68", 700, 1100},
		{"average-120-345-567-968", 1300, 1900}, // four steps: the longest bundled solution
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			p := problemByID(t, tt.id)
			var medians []int
			for v, s := range servers {
				got := sampleBatch(t, s, chatPrompt(t, s, p.Prompt), 50, 1000*v, map[string]any{"max_new_tokens": 4000})
				for _, x := range got {
					require.Equal(t, "stop", x.finish, "every solution ends with EOS")
					assert.Contains(t, x.text, `\boxed{`)
				}
				medians = append(medians, medianLen(got))
			}
			t.Logf("median tokens by verbosity: %v", medians)
			for v := 1; v < len(medians); v++ {
				assert.Greater(t, medians[v], medians[v-1], "level %d writes more than level %d", v, v-1)
			}
			assert.GreaterOrEqual(t, medians[3], tt.min)
			assert.LessOrEqual(t, medians[3], tt.max)
			assert.Less(t, medians[0], 256, "level 0 fits in one segment")
			assert.Greater(t, medians[3], 2*256, "level 3 spans at least three 256-token segments")
		})
	}
}

func TestVerboseSuccessDependsOnProblem(t *testing.T) {
	t.Parallel() // seconds of pure computation; overlaps the suite's sleeping latency tests
	s := startSim(t, Config{Verbosity: 3})
	tests := []struct {
		id       string
		min, max float64
	}{
		{"paren-3-4-5", 0.85, 1},
		{"linear-4-3-79", 0.85, 1},
		{"series-100", 0.3, 0.7},
		{"series-365", 0.3, 0.7},
		{"change-17-13-500", 0.3, 0.7},
		{"average-120-345-567-968", 0.3, 0.7},
	}
	for i, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			p := problemByID(t, tt.id)
			got := sampleBatch(t, s, chatPrompt(t, s, p.Prompt), 150, 10000*i, map[string]any{"max_new_tokens": 4000})
			ok := 0
			for _, x := range got {
				if strings.Contains(x.text, p.Label) {
					ok++
				}
			}
			rate := float64(ok) / float64(len(got))
			t.Logf("%s: success %.2f at temperature 1", p.ID, rate)
			assert.GreaterOrEqual(t, rate, tt.min)
			assert.LessOrEqual(t, rate, tt.max)
		})
	}
}

func TestVerboseContinuationIsConsistent(t *testing.T) {
	s := startSim(t, Config{Verbosity: 3})
	tests := []struct {
		name   string
		prompt string
		seg    int
		params map[string]any
	}{
		{"256-token segments", "What is the average of 120, 345, 567 and 968?", 256, map[string]any{"sampling_seed": 77}},
		{"256-token segments, top-p", "Find the sum of the integers from 1 to 365.", 256, map[string]any{"sampling_seed": 5, "temperature": 0.8, "top_p": 0.95}},
		{"odd segments", "Compute 123 * 45 + 678.", 97, map[string]any{"sampling_seed": 9, "temperature": 1.2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prompt := chatPrompt(t, s, tt.prompt)
			one := map[string]any{"max_new_tokens": 4000}
			for k, v := range tt.params {
				one[k] = v
			}
			want := ids(generate(t, s, prompt, one)["output_ids"])
			require.Greater(t, len(want), 2*tt.seg, "the solution spans several segments")
			var got []uint32
			ctx := prompt
			for i := 0; i < 100; i++ {
				p := map[string]any{"max_new_tokens": tt.seg}
				for k, v := range tt.params {
					p[k] = v
				}
				r := generate(t, s, ctx, p)
				out := ids(r["output_ids"])
				require.LessOrEqual(t, len(out), tt.seg)
				got = append(got, out...)
				ctx = concat(ctx, out)
				if obj(obj(r["meta_info"])["finish_reason"])["type"] == "stop" {
					break
				}
			}
			assert.Equal(t, want, got, "segments compose into the one-shot answer")
			assert.Equal(t, s.EOS(), got[len(got)-1])
		})
	}
}

// wrongSoFar reports whether the values written so far lead to a wrong answer unless a
// later line catches the slip.
func (s *sstate) wrongSoFar() bool {
	truth := s.def.truth()
	for i, v := range s.vals {
		if v != truth[i] {
			return true
		}
	}
	if len(s.mvals) == 0 || s.step >= len(s.def.steps) {
		return false
	}
	st := s.def.steps[s.step]
	var right []float64
	for _, m := range s.plan(st.op, st.a.value(s.vals), st.b.value(s.vals)) {
		right = append(right, apply(m.op, m.x.value(right), m.y.value(right)))
	}
	for k, v := range s.mvals {
		if v != right[k] {
			return true
		}
	}
	return false
}

// TestVerboseCheckpointValues cuts sampled solutions at 256-token boundaries, as FOCUS's
// segments do, sorts the cuts by whether the text so far holds an uncaught slip, and
// estimates each checkpoint's value by continuing it 12 times.
func TestVerboseCheckpointValues(t *testing.T) {
	t.Parallel() // seconds of pure computation; overlaps the suite's sleeping latency tests
	s := startSim(t, Config{Verbosity: 3})
	temp1 := sampling{maxTokens: 4000, temperature: 1, topP: 1}
	depths := []int{256, 512, 768, 1024}
	for _, id := range []string{"series-365", "change-17-13-500"} {
		t.Run(id, func(t *testing.T) {
			p := problemByID(t, id)
			prompt := chatPrompt(t, s, p.Prompt)
			type cell struct{ prefixes, runs, ok int }
			value := map[string]*cell{} // "depth clean|slip"
			for i := 0; i < 40; i++ {
				roll := temp1
				roll.seed = uint64(500 + i)
				r := s.model.generate(prompt, roll, toolMode{})
				for _, cut := range depths {
					if cut >= len(r.ids) {
						continue
					}
					ctx := concat(prompt, r.ids[:cut])
					cur, _ := s.model.start([]byte(s.decode(ctx, false)), toolMode{})
					wrong, clean := 0, 0
					for _, pos := range cur.pos {
						if pos.next != nil && pos.next.wrongSoFar() {
							wrong++
						} else {
							clean++
						}
					}
					if wrong > 0 && clean > 0 {
						continue // cut inside a line that may still turn out either way
					}
					key := fmt.Sprint(cut, " clean")
					if wrong > 0 {
						key = fmt.Sprint(cut, " slip")
					}
					c := value[key]
					if c == nil {
						c = &cell{}
						value[key] = c
					}
					c.prefixes++
					for j := 0; j < 12; j++ {
						cont := temp1
						cont.seed = uint64(9000 + j)
						c.runs++
						if strings.Contains(s.decode(s.model.generate(ctx, cont, toolMode{}).ids, true), p.Label) {
							c.ok++
						}
					}
				}
			}
			// rate is a checkpoint class's success rate; -1 when fewer than 5 cuts fell in it.
			rate := func(depth int, class string) float64 {
				c := value[fmt.Sprint(depth, " ", class)]
				if c == nil || c.prefixes < 5 {
					return -1
				}
				return float64(c.ok) / float64(c.runs)
			}
			compared := 0
			for _, d := range depths {
				clean, slip := rate(d, "clean"), rate(d, "slip")
				t.Logf("checkpoint at %4d tokens: success %.2f after a clean prefix, %.2f after an uncaught slip (-1: under 5 cuts)", d, clean, slip)
				if clean >= 0 && slip >= 0 {
					// A written slip lowers a checkpoint's value.
					assert.Greater(t, clean-slip, 0.25, "depth %d", d)
					compared++
				}
			}
			assert.GreaterOrEqual(t, compared, 2)
			// The more checks a slip has already passed, the less it is worth...
			early := rate(512, "slip")
			require.GreaterOrEqual(t, early, 0.0)
			require.GreaterOrEqual(t, rate(1024, "slip"), 0.0)
			assert.Greater(t, early-rate(1024, "slip"), 0.15, "a slip is cheapest while checks are still ahead")
			assert.Less(t, rate(1024, "slip"), 0.1, "a slip past every check is final")
			// ...and a clean prefix still carries the risk of the lines it has not written yet.
			assert.Less(t, rate(256, "clean"), 0.75, "early checkpoints still carry risk")
			assert.Greater(t, rate(1024, "clean")-rate(256, "clean"), 0.2, "later clean checkpoints are safer")
		})
	}
}

func TestVerboseMaxTokensAndModes(t *testing.T) {
	s := startSim(t, Config{Verbosity: 3, Think: true})
	prompt := chatPrompt(t, s, "Find the sum of the integers from 1 to 365.")
	for _, max := range []int{0, 1, 255, 256, 257, 700} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			for seed := 0; seed < 5; seed++ {
				r := generate(t, s, prompt, map[string]any{"max_new_tokens": max, "sampling_seed": seed, "temperature": 1.5})
				assert.LessOrEqual(t, len(arr(r["output_ids"])), max)
				if max > 0 {
					assert.Equal(t, map[string]any{"type": "length", "length": float64(max)}, obj(r["meta_info"])["finish_reason"])
				}
			}
		})
	}
	t.Run("think, then the verbose solution", func(t *testing.T) {
		r := generate(t, s, prompt, map[string]any{"max_new_tokens": 4000, "temperature": 0})
		text := r["text"].(string)
		assert.True(t, strings.HasPrefix(text, "<think>\n"), "%q", text)
		for _, want := range []string{"Step 1 of 2", "step 2 of 2", "verify it independently", `\boxed{66795}`} {
			assert.Contains(t, text, want)
		}
	})
	t.Run("tool calls are unchanged", func(t *testing.T) {
		tool := map[string]any{"type": "function", "function": map[string]any{"name": "calculator",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"expression": map[string]any{"type": "string"}}}}}
		p, err := s.render([]any{map[string]any{"role": "user", "content": "Compute 17 * 23 + 45."}}, []any{tool})
		require.NoError(t, err)
		r := generate(t, s, p, map[string]any{"max_new_tokens": 200, "temperature": 0})
		assert.Contains(t, r["text"], `<tool_call>`)
		assert.NotContains(t, r["text"], "Step 1")
	})
}

// BenchmarkGenerateVerbose is BenchmarkGenerate at verbosity 3: 256-token segments that
// stay inside one long solution.
func BenchmarkGenerateVerbose(b *testing.B) {
	s := startSim(b, Config{Verbosity: 3})
	prompt := chatPrompt(b, s, "Find the sum of the integers from 1 to 365.")
	body, _ := json.Marshal(map[string]any{"input_ids": prompt, "return_logprob": true,
		"sampling_params": map[string]any{"max_new_tokens": 256, "ignore_eos": true}})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Post(s.URL()+"/generate", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(s.Stats().GeneratedTokens)/b.Elapsed().Seconds(), "tokens/s")
}

// TestZeroVerbosityIsUnchanged pins level 0 (the zero Config) to the outputs it had before
// verbosity existed: a digest of sampled tokens, logprobs and finish reasons for every
// bundled problem. A deliberate change to the terse script or the tokenizer must update it.
func TestZeroVerbosityIsUnchanged(t *testing.T) {
	s := startSim(t, Config{})
	h := sha256.New()
	for _, pr := range Problems() {
		p := chatPrompt(t, s, pr.Prompt)
		for seed := 0; seed < 5; seed++ {
			r := s.model.generate(p, sampling{maxTokens: 400, temperature: 1, topP: 1, seed: uint64(seed)}, toolMode{})
			fmt.Fprintln(h, r.ids, r.lps, r.finish)
		}
	}
	assert.Equal(t, "080fec6e8cdb6038d58e6285412d3146cb4307ec0271856df5c1fb492ce48e0c", fmt.Sprintf("%x", h.Sum(nil)))
}
