package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/focus-go/focus-go/backends/chat"
	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/session"
)

// benchProblem is one entry of the -problems file: {"id", "label", "prompt_tokens"}.
type benchProblem struct {
	ID           string   `json:"id"`
	Label        string   `json:"label"`
	PromptTokens []uint32 `json:"prompt_tokens"`
}

// collectTrees runs -trees concurrent Selective(32, 16) collections with Segments(256), a
// native MathEnv and a constant critic against URL, the engine's all-Go path without
// Python, and prints the steady-state {"sps", "cpu_us_per_segment", "alloc_bytes_per_segment",
// "allocs_per_segment", "gc_cycles"} over a -d second
// window opening -warmup seconds in, with {"trees", "segments", "credited_segments"}.
// The score is value_refinement, the rule of the plain-Python reference collector and of
// checkouts before 2026-12-02, so every collector of the comparison builds trees the
// same way.
func collectTrees(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("collect needs a URL")
	}
	url := args[0]
	fs := flag.NewFlagSet("collect", flag.ExitOnError)
	model := fs.String("model", "", "model directory (tokenizer) of the server")
	problemsFile := fs.String("problems", "", "JSON file: [{id, label, prompt_tokens}]")
	trees := fs.Int("trees", 16, "concurrent trees")
	seconds := fs.Float64("d", 3, "measured window in seconds")
	warmup := fs.Float64("warmup", 1.5, "seconds before the measured window opens")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile here")
	memprofile := fs.String("memprofile", "", "write an allocation profile (every allocation sampled per 4 KB) here at the end")
	record := fs.String("record", "", "write the first -max-record requests sent in the measured window here (for load -replay)")
	maxRecord := fs.Int("max-record", 4000, "requests to record")
	fs.Parse(args[1:])
	if *memprofile != "" {
		runtime.MemProfileRate = 4096
	}
	data, err := os.ReadFile(*problemsFile)
	if err != nil {
		return err
	}
	var problems []benchProblem
	if err := json.Unmarshal(data, &problems); err != nil {
		return err
	}
	if len(problems) == 0 {
		return fmt.Errorf("%s lists no problems", *problemsFile)
	}
	codec, err := chat.Load(*model)
	if err != nil {
		return err
	}
	defer codec.Close()
	client, err := sglang.New(sglang.Config{BaseURL: url})
	if err != nil {
		return err
	}
	defer client.Close()
	stop, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	var policy collect.Policy = client
	// The steady-state window of benchmarks/reference/window.py: trees are credited with the
	// share of their segments that falls inside [warmup, warmup + d].
	begin := time.Now()
	winStart := begin.Add(time.Duration(*warmup * float64(time.Second)))
	// Recorded from the window's opening: the first requests of a run continue shallow
	// prefixes (446 prompt tokens on average in the first 4,000, against 557 in the
	// steady state), so a replay of them would cost less per request than the window's.
	rec := &recorder{Policy: client, max: *maxRecord, from: winStart}
	if *record != "" {
		policy = rec
	}
	parts := benchParts{policy: policy, codec: codec.Tokenizer()}
	winEnd := winStart.Add(time.Duration(*seconds * float64(time.Second)))
	var cpuStart, cpuEnd time.Duration
	var mem0, mem1 runtime.MemStats
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		time.Sleep(time.Until(winStart))
		cpuStart = processCPU()
		runtime.ReadMemStats(&mem0)
		time.Sleep(time.Until(winEnd))
		cpuEnd = processCPU()
		runtime.ReadMemStats(&mem1)
	}()
	type span struct {
		began, ended time.Time
		segments     int
	}
	var mu sync.Mutex
	var spans []span
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < *trees; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; time.Now().Before(winEnd); i += *trees {
				p := problems[i%len(problems)]
				sel := search.Selective(32, 16)
				sel.Score = search.ScoreValueRefinement
				spec := session.Spec{
					Config: collect.Config{
						ProblemID: p.ID, PromptTokens: p.PromptTokens, Segments: 256,
						Sampling: generate.SamplingParams{Temperature: generate.Float64(1), Logprobs: generate.Int(0)},
						Search:   sel, Reward: prepare.DefaultRewardConfig(), AllowPartial: true,
					},
					Codec:  1,
					Policy: session.Part{Kind: "native", Handle: 1},
					Env:    session.Part{Kind: "math", Label: p.Label},
					Critic: &session.Part{Kind: "constant", Value: 0.5},
				}
				spec.Config.Search.Seed = uint64(i)
				began := time.Now()
				res, err := collectOne(spec, parts)
				if err != nil || res.Tree == nil {
					if err != nil {
						firstErr.CompareAndSwap(nil, err.Error())
					}
					failures.Add(1)
					continue
				}
				mu.Lock()
				spans = append(spans, span{began, time.Now(), res.Tree.Len() - 1})
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	sampled.Wait()
	credited, segments := 0.0, 0
	for _, s := range spans {
		segments += s.segments
		overlap := minTime(s.ended, winEnd).Sub(maxTime(s.began, winStart))
		if overlap > 0 {
			credited += float64(s.segments) * overlap.Seconds() / max(s.ended.Sub(s.began).Seconds(), 1e-9)
		}
	}
	window := winEnd.Sub(winStart).Seconds()
	out, _ := json.Marshal(map[string]any{"trees": len(spans), "segments": segments, "credited_segments": credited,
		"seconds": window, "sps": credited / window, "cpu_us_per_segment": (cpuEnd - cpuStart).Seconds() / max(credited, 1) * 1e6,
		"failures": failures.Load(), "first_error": firstErr.Load(),
		// The process's allocation over the window, per credited segment, and its GC cycles.
		"alloc_bytes_per_segment": float64(mem1.TotalAlloc-mem0.TotalAlloc) / max(credited, 1),
		"allocs_per_segment":      float64(mem1.Mallocs-mem0.Mallocs) / max(credited, 1),
		"gc_cycles":               mem1.NumGC - mem0.NumGC})
	fmt.Println(string(out))
	if *memprofile != "" {
		if err := writeAllocProfile(*memprofile); err != nil {
			return err
		}
	}
	if *record != "" {
		data, err := json.Marshal(rec.requests)
		if err != nil {
			return err
		}
		return os.WriteFile(*record, data, 0o644)
	}
	return nil
}

// collectOne runs one collection through core/session, the code path Python's
// Collector uses: the spec built from data, the parts resolved, started, waited for.
func collectOne(spec session.Spec, parts session.Resolver) (collect.Result, error) {
	s, err := session.Start(context.Background(), spec, parts)
	if err != nil {
		return collect.Result{}, err
	}
	defer s.Close()
	if _, err := s.Wait(context.Background(), -1); err != nil {
		return collect.Result{}, err
	}
	out, err := s.Result()
	if err != nil {
		return collect.Result{}, err
	}
	return out.Result, out.Err
}

// benchParts resolves the load generator's one policy and codec (handle 1 each).
type benchParts struct {
	policy collect.Policy
	codec  collect.Codec
}

func (b benchParts) Policy(h uint64) (collect.Policy, error) {
	if h != 1 {
		return nil, fmt.Errorf("loadgen: no policy %d", h)
	}
	return b.policy, nil
}

func (b benchParts) Codec(h uint64) (collect.Codec, error) {
	if h != 1 {
		return nil, fmt.Errorf("loadgen: no codec %d", h)
	}
	return b.codec, nil
}

func (benchParts) HTTPCritic(string, time.Duration) (collect.Critic, func(), error) {
	return nil, nil, fmt.Errorf("loadgen: no HTTP critic")
}

func (benchParts) Turns(uint64, session.Turn) (*collect.Turns, error) {
	return nil, fmt.Errorf("loadgen: no whole-turn context")
}

// recorded is one policy request as the engine sent it.
type recorded struct {
	Tokens    []uint32 `json:"tokens"`
	MaxTokens int      `json:"max_tokens"`
	Seed      int64    `json:"seed"`
}

// recorder passes requests to Policy and keeps the first max of those sent from its from.
type recorder struct {
	collect.Policy
	max      int
	from     time.Time
	mu       sync.Mutex
	requests []recorded
}

func (r *recorder) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	r.mu.Lock()
	if len(r.requests) < r.max && !time.Now().Before(r.from) {
		rec := recorded{Tokens: append([]uint32(nil), req.Tokens...)}
		if req.Params.MaxTokens != nil {
			rec.MaxTokens = *req.Params.MaxTokens
		}
		if req.Params.Seed != nil {
			rec.Seed = *req.Params.Seed
		}
		r.requests = append(r.requests, rec)
	}
	r.mu.Unlock()
	return r.Policy.Generate(ctx, req)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// writeAllocProfile writes the allocations sampled since the start (pprof's "allocs").
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
