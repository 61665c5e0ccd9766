package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/focus-go/focus-go/core/bridge"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/session"
	"github.com/focus-go/focus-go/core/status"
)

// boxedOne decodes every reply as the answer 1.
type boxedOne struct{}

func (boxedOne) Encode(string, bool) ([]uint32, error) { return nil, nil }
func (boxedOne) Decode([]uint32, bool) (string, error) { return `\boxed{1}`, nil }

// parts resolves codec handle 1; this example has no native policy or HTTP critic.
type parts struct{}

func (parts) Policy(h uint64) (collect.Policy, error) {
	return nil, status.Errorf(status.InvalidHandle, "no policy %d", h)
}
func (parts) Codec(uint64) (collect.Codec, error) { return boxedOne{}, nil }
func (parts) HTTPCritic(string, time.Duration) (collect.Critic, func(), error) {
	return nil, nil, status.Errorf(status.InvalidArgument, "no HTTP critic here")
}
func (parts) Turns(uint64, session.Turn) (*collect.Turns, error) {
	return nil, status.Errorf(status.InvalidArgument, "no whole turns here")
}

// A collection from its JSON spec, with a remote policy served the way the Python driver
// serves it: poll the session's requests, answer each, until the collection ends.
func Example() {
	var spec session.Spec
	if err := json.Unmarshal([]byte(`{
		"problem_id": "one", "prompt_tokens": [1, 2, 3], "segments": 4,
		"search": {"budget": 4, "warmup": 2, "per_pass": 4, "max_children": 4, "score": "value_refinement"},
		"codec": 1, "policy": {"kind": "remote", "object": 1}, "env": {"kind": "math", "label": "1"},
		"critic": {"kind": "constant", "value": 0.5}}`), &spec); err != nil {
		panic(err)
	}
	s, err := session.Start(context.Background(), spec, parts{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for {
		reqs, err := s.Poll(context.Background(), 16)
		if status.CodeOf(err) == status.Cancelled {
			break // the collection ended
		}
		for _, req := range reqs {
			_ = s.Answer(req.ID, bridge.Reply{Payload: []byte(`{"stop_reason": "stop"}`), Tokens: []uint32{9}, Logprobs: []float64{-0.1}})
		}
	}
	// The bridge closes as the tree ends, a moment before the session records its result.
	if _, err := s.Wait(context.Background(), -1); err != nil {
		panic(err)
	}
	out, err := s.Result()
	if err != nil {
		panic(err)
	}
	fmt.Println("error:", out.Err)
	fmt.Println("rollouts:", out.Tree.Stats.Rollouts, "nodes:", len(out.Tree.Nodes))
	// Output:
	// error: <nil>
	// rollouts: 4 nodes: 5
}
