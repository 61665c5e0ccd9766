// Command loadgen measures the ceiling the benchmarks compare against: it either serves the
// simulated inference server in its own process (`loadgen serve`), or drives a server with
// segment-sized requests from the Go-native SGLang client and reports requests per second
// (`loadgen load URL`), with no tree logic at all, or collects Selective(32, 16) trees
// with the Go engine alone, no Python (`loadgen collect URL`), optionally under a CPU
// profile.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/sim"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen serve [-config JSON] [-cpuprofile FILE] | loadgen load URL [-c N] [-d seconds] [-tokens N] [-prompt FILE] | loadgen collect URL -model DIR -problems FILE [-trees N] [-d seconds] [-cpuprofile FILE] [-record FILE] | loadgen chain URL -prompt FILE [-n N] [-first s] [-per s]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	case "collect":
		err = collectTrees(os.Args[2:])
	case "chain":
		err = chain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// serve starts the simulated server, prints {"url", "model_dir", "problems"} on one line
// and runs until stdin closes or a signal arrives.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	config := fs.String("config", "{}", "sim.Config as JSON")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the server here")
	fs.Parse(args)
	var cfg sim.Config
	if err := json.Unmarshal([]byte(*config), &cfg); err != nil {
		return err
	}
	s, err := sim.Start(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	out, _ := json.Marshal(map[string]any{"url": s.URL(), "model_dir": s.ModelDir(), "problems": s.Problems()})
	fmt.Println(string(out))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	go func() {
		buf := make([]byte, 1)
		os.Stdin.Read(buf) // returns when the parent closes stdin
		stop <- os.Interrupt
	}()
	<-stop
	return nil
}

// load sends max_tokens=-tokens requests with the given prompt ids from -c workers for -d
// seconds, or with -replay the requests recorded by `collect -record` (each worker cycles
// through them from its own offset), and prints {"requests", "seconds", "rps", "tokens",
// "failures", "first_error"}.
func load(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("load needs a URL")
	}
	url := args[0]
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	workers := fs.Int("c", 64, "concurrent requests")
	seconds := fs.Float64("d", 3, "duration in seconds")
	tokens := fs.Int("tokens", 256, "max tokens per request")
	promptFile := fs.String("prompt", "", "JSON file with the prompt token ids")
	replayFile := fs.String("replay", "", "JSON file of recorded requests [{tokens, max_tokens, seed}]")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile here")
	fs.Parse(args[1:])
	var replay []recorded
	switch {
	case *replayFile != "":
		data, err := os.ReadFile(*replayFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &replay); err != nil {
			return err
		}
		if len(replay) == 0 {
			return fmt.Errorf("%s holds no requests", *replayFile)
		}
	default:
		prompt := []uint32{1, 2, 3, 4}
		if *promptFile != "" {
			data, err := os.ReadFile(*promptFile)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &prompt); err != nil {
				return err
			}
		}
		replay = []recorded{{Tokens: prompt, MaxTokens: *tokens}}
	}
	client, err := sglang.New(sglang.Config{BaseURL: url, MaxConcurrency: *workers})
	if err != nil {
		return err
	}
	defer client.Close()
	stop, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*seconds*float64(time.Second)))
	defer cancel()
	var requests, generated, failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				r := replay[(w*len(replay)/(*workers)+i)%len(replay)]
				seed, maxTokens := r.Seed, r.MaxTokens
				if len(replay) == 1 {
					seed = int64(w*1_000_003 + i)
				}
				res, err := client.Generate(ctx, generate.Request{Tokens: r.Tokens, Params: generate.SamplingParams{
					Temperature: generate.Float64(1), MaxTokens: &maxTokens, Seed: &seed, Logprobs: generate.Int(0)}})
				if err != nil {
					if dl, _ := ctx.Deadline(); time.Until(dl) < time.Second {
						return // a retry cut short by the end of the run, not a server failure
					}
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				requests.Add(1)
				generated.Add(int64(len(res.Tokens)))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{"requests": requests.Load(), "seconds": elapsed,
		"cpu_us_per_request": (processCPU() - cpu0).Seconds() / max(float64(requests.Load()), 1) * 1e6,
		"rps":                float64(requests.Load()) / elapsed, "tokens": generated.Load(), "failures": failures.Load(),
		"first_error": firstErr.Load()})
	fmt.Println(string(out))
	return nil
}

// startCPUProfile profiles this process into path until stop is called; an empty path
// profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
