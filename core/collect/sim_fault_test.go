package collect

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/sim"
)

// TestSimulatedServerFaults runs collections over loopback HTTP against the simulated
// SGLang server with each injected fault, next to a fault-free one: transient faults leave
// the tree bit-identical, others fail exactly the rollouts whose request met them (every
// other rollout identical). Afterwards, with the client and server closed, no goroutine
// is left: the Go half of the leak check for the HTTP path.
func TestSimulatedServerFaults(t *testing.T) {
	srv, err := sim.Start(sim.Config{Seed: 3})
	require.NoError(t, err)
	client, err := sglang.New(sglang.Config{BaseURL: srv.URL(),
		Retry: transport.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}})
	require.NoError(t, err)

	const n = 8
	run := func(t *testing.T, faults []sim.Fault, policyTimeout time.Duration) Result {
		t.Helper()
		require.NoError(t, srv.SetFaults(faults...))
		defer func() { require.NoError(t, srv.SetFaults()) }()
		cfg := baseConfig(search.Independent(n))
		// Short segments: every first request runs to max_tokens (extra_tokens needs that).
		cfg.Segments, cfg.AllowPartial, cfg.PolicyTimeout = 8, true, policyTimeout
		cfg.Sampling.Temperature = new(float64)
		*cfg.Sampling.Temperature = 1
		env := newFakeEnv()
		res, err := Run(context.Background(), cfg, client, env, &fakeCritic{})
		require.NoError(t, err)
		require.NoError(t, res.Tree.Validate())
		assert.Equal(t, env.stats.forks.Load(), env.stats.closes.Load(), "every fork is closed")
		return res
	}
	clean := run(t, nil, 0)
	require.Empty(t, clean.Failures)

	tests := []struct {
		name    string
		fault   sim.Fault
		timeout time.Duration
		failed  int
	}{
		{"503 retried", sim.Fault{Kind: sim.FaultHTTPError, Status: 503, Count: 3}, 0, 0},
		{"429 retried", sim.Fault{Kind: sim.FaultHTTPError, Status: 429, Count: 2}, 0, 0},
		{"connection closed, retried", sim.Fault{Kind: sim.FaultCloseConnection, Count: 2}, 0, 0},
		{"prompt in output_ids", sim.Fault{Kind: sim.FaultPromptInOutputIDs, Count: 4}, 0, 0},
		{"400", sim.Fault{Kind: sim.FaultHTTPError, Status: 400, Count: 2}, 0, 2},
		{"malformed JSON", sim.Fault{Kind: sim.FaultMalformedJSON, Count: 1}, 0, 1},
		{"truncated body", sim.Fault{Kind: sim.FaultTruncatedBody, Count: 2}, 0, 2},
		{"abort", sim.Fault{Kind: sim.FaultAbort, Count: 1}, 0, 1},
		{"extra tokens", sim.Fault{Kind: sim.FaultExtraTokens, Count: 1}, 0, 1},
		{"missing logprobs", sim.Fault{Kind: sim.FaultMissingLogprobs, Count: 2}, 0, 2},
		{"hang past the policy timeout", sim.Fault{Kind: sim.FaultHang, Count: 1}, 200 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, []sim.Fault{tt.fault}, tt.timeout)
			assert.Len(t, res.Failures, tt.failed, "%+v", res.Failures)
			ct, ft := clean.Tree, res.Tree
			require.Len(t, ft.Nodes[0].Children, n)
			lost := 0
			for i := range n {
				got := subtree(ft, ft.Nodes[0].Children[i])
				if got == "FAILED" {
					lost++
					continue
				}
				assert.Equal(t, subtree(ct, ct.Nodes[0].Children[i]), got, "rollout %d", i)
			}
			assert.Equal(t, tt.failed, lost)
			for _, f := range res.Failures {
				assert.Equal(t, tt.fault.Kind == sim.FaultAbort, f.Aborted, f.Message)
			}
		})
	}
	client.Close()
	require.NoError(t, srv.Close())
	// fasthttp keeps process-wide helpers (its dialer's address cache cleaner) and the
	// simulated server's idle workers linger for their idle timeout: count only the
	// goroutines of the engine, the transport and fasthttp's client (except the client's
	// idle-connection cleaner, which ends by itself within MaxIdleConnDuration).
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := clientGoroutines()
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clientGoroutines are the stacks of live goroutines running collection or HTTP client code.
func clientGoroutines() []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "connsCleaner") {
			continue
		}
		for _, mark := range []string{"collect.(*engine)", "backends/transport.", "fasthttp.(*HostClient)", "backends/sglang."} {
			if strings.Contains(g, mark) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
