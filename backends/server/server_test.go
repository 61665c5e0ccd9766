package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/server"
	"github.com/focus-go/focus-go/core/fleet"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/sim"
)

func startSim(t *testing.T, maxRunning int) *sim.Server {
	t.Helper()
	srv, err := sim.Start(sim.Config{Seed: 1, Latency: sim.Latency{MaxConcurrent: maxRunning}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"unknown backend", server.Config{Backend: "tgi", URLs: []string{"http://127.0.0.1:1"}},
			`policy config: unknown backend "tgi", expected sglang or vllm`},
		{"no backend", server.Config{URLs: []string{"http://127.0.0.1:1"}}, `unknown backend ""`},
		{"no url", server.Config{Backend: "sglang"}, "fleet: no server replicas"},
		{"vllm without a model", server.Config{Backend: "vllm", URLs: []string{"http://127.0.0.1:1"}}, "vllm: a model or served model name is required"},
		{"malformed url", server.Config{Backend: "vllm", Model: "m", URLs: []string{"http://127.0.0.1:1", "ftp://x"}}, "is not an http(s)://host[:port][/path] URL"},
		{"bad routing", server.Config{Backend: "sglang", URLs: []string{"http://127.0.0.1:1"}, Routing: "random"}, `fleet: routing "random"`},
		{"negative capacity", server.Config{Backend: "sglang", URLs: []string{"http://127.0.0.1:1"}, Capacity: -1}, "capacity -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := server.Open(tt.cfg)
			assert.Nil(t, p)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestOpenBuildsTheFleet(t *testing.T) {
	a, b := startSim(t, 8), startSim(t, 8)
	tests := []struct {
		name string
		cfg  server.Config
		// capacity after the startup check: SGLang reports max_running_requests, vLLM
		// reports nothing (the configured Capacity, or fleet.DefaultCapacity, stays).
		capacity int
		routing  fleet.Routing
	}{
		{"sglang, two replicas", server.Config{Backend: "sglang", URLs: []string{a.URL(), b.URL()}}, 16, fleet.Affinity},
		{"sglang, a limit", server.Config{Backend: "sglang", URLs: []string{a.URL(), b.URL()}, MaxConcurrency: 6, Routing: fleet.RoundRobin}, 6, fleet.RoundRobin},
		{"vllm, one replica", server.Config{Backend: "vllm", URLs: []string{a.URL() + "/v1"}, ServedModel: a.ModelName(), Capacity: 3}, 3, fleet.Affinity},
		{"vllm, default capacity", server.Config{Backend: "vllm", URLs: []string{a.URL() + "/v1"}, ServedModel: a.ModelName()}, fleet.DefaultCapacity, fleet.Affinity},
	}
	prompt, err := a.Tokenizer().Encode(sim.Problems()[0].Prompt, false)
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := server.Open(tt.cfg)
			require.NoError(t, err)
			defer p.Close()
			require.Equal(t, len(tt.cfg.URLs), p.Replicas())
			infos, err := p.StartupCheck(context.Background())
			require.NoError(t, err)
			assert.Len(t, infos, len(tt.cfg.URLs))
			load := p.Load()
			assert.Equal(t, tt.capacity, load.Capacity)
			assert.Equal(t, tt.routing, load.Routing)
			for i, r := range load.Replicas {
				assert.Equal(t, tt.cfg.URLs[i], r.Name)
			}
			res, err := p.Generate(context.Background(), generate.Request{Tokens: prompt,
				Params: generate.SamplingParams{MaxTokens: generate.Int(4), Temperature: generate.Float64(0)}})
			require.NoError(t, err)
			assert.Len(t, res.Tokens, 4)
		})
	}
}

func ExampleOpen() {
	srv, err := sim.Start(sim.Config{Latency: sim.Latency{MaxConcurrent: 32}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	p, err := server.Open(server.Config{Backend: "sglang", URLs: []string{srv.URL()}})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	if _, err := p.StartupCheck(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("replicas", p.Replicas(), "capacity", p.Load().Capacity)
	// Output: replicas 1 capacity 32
}
