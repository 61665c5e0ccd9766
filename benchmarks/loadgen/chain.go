package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/core/generate"
)

// chain is the latency floor of one path with no tree logic: -n rollouts, one after
// another, each a chain of 256-token segment requests continuing its own prefix until the
// model stops, and prints {"wall", "modelled", "ratio", "segments"}: wall time against the
// sum of the server's modelled latency (-first + -per × tokens per segment), the same
// model benchmarks/run.py's critical path uses.
func chain(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("chain needs a URL")
	}
	url := args[0]
	fs := flag.NewFlagSet("chain", flag.ExitOnError)
	rollouts := fs.Int("n", 8, "rollouts, one after another")
	first := fs.Float64("first", 0.02, "modelled seconds to the first token")
	per := fs.Float64("per", 0.0002, "modelled seconds per token")
	promptFile := fs.String("prompt", "", "JSON file with the prompt token ids")
	fs.Parse(args[1:])
	var prompt []uint32
	data, err := os.ReadFile(*promptFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &prompt); err != nil {
		return err
	}
	client, err := sglang.New(sglang.Config{BaseURL: url})
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	var wall time.Duration
	modelled, segments := 0.0, 0
	for r := 0; r < *rollouts; r++ {
		prefix := append([]uint32(nil), prompt...)
		for k := 0; k < 32; k++ {
			seed, maxTokens := int64(r*1_000_003+k), 256
			began := time.Now()
			res, err := client.Generate(ctx, generate.Request{Tokens: prefix, Params: generate.SamplingParams{
				Temperature: generate.Float64(1), MaxTokens: &maxTokens, Seed: &seed, Logprobs: generate.Int(0)}})
			wall += time.Since(began)
			if err != nil {
				return err
			}
			segments++
			modelled += *first + *per*float64(len(res.Tokens))
			if res.StopReason != generate.StopReasonLength {
				break
			}
			prefix = append(prefix, res.Tokens...)
		}
	}
	out, _ := json.Marshal(map[string]any{"wall": wall.Seconds(), "modelled": modelled,
		"ratio": wall.Seconds() / modelled, "segments": segments})
	fmt.Println(string(out))
	return nil
}
