package collect_test

import (
	"context"
	"fmt"

	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/mathenv"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
)

// bytes is a toy tokenizer: one token per byte.
type bytes struct{}

func (bytes) Encode(text string, _ bool) ([]uint32, error) {
	ids := make([]uint32, len(text))
	for i := range text {
		ids[i] = uint32(text[i])
	}
	return ids, nil
}

func (bytes) Decode(ids []uint32, _ bool) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}

// guesser answers "x=\boxed{5}" or "x=\boxed{4}" depending on its seed, a
// few tokens per call, like a model continuing its own exact prefix.
type guesser struct{ prompt int }

func (g guesser) Generate(_ context.Context, req generate.Request) (*generate.Result, error) {
	answer := "x=\\boxed{5}"
	if *req.Params.Seed%3 == 0 {
		answer = "x=\\boxed{4}"
	}
	done := len(req.Tokens) - g.prompt
	n, stop := min(*req.Params.MaxTokens, len(answer)-done), generate.StopReasonLength
	if done+n == len(answer) {
		stop = generate.StopReasonStop
	}
	ids, _ := bytes{}.Encode(answer[done:done+n], false)
	return &generate.Result{Tokens: ids, Logprobs: make([]float64, n), StopReason: stop, ExactGeneration: true}, nil
}

func Example() {
	prompt, _ := bytes{}.Encode("3x+7=22. ", false)
	cfg := collect.Config{
		ProblemID: "linear", PromptTokens: prompt, PromptText: "3x+7=22. ",
		Segments: 4, MaxTotalTokens: 64, Codec: bytes{},
		Search: search.Selective(6, 4), Reward: prepare.DefaultRewardConfig(),
	}
	env := mathenv.New(`\boxed{5}`, func(ids []uint32) (string, error) { return bytes{}.Decode(ids, false) })
	res, err := collect.Run(context.Background(), cfg, guesser{len(prompt)}, env, collect.ConstantCritic{Value: 0.5})
	if err != nil {
		panic(err)
	}
	t := res.Tree
	fmt.Println("rollouts", t.Stats.Rollouts, "unspent", t.Stats.BudgetUnspent, "reused", t.Stats.PrefixTokensReused)
	for _, nd := range t.Nodes[1:] {
		fmt.Printf("node %2d <- %2d pass %d %-8q reward %.0f done %t\n", nd.ID, nd.Parent, nd.SearchPass, nd.Text, nd.Reward, nd.Done)
	}
	// Pass 1 is Selective's branching round: the default score,
	// value_refinement_per_token, prices each branch by the tokens its
	// rollout generates, so both branches start one segment above a leaf
	// and reuse 8 tokens of prefix each (docs/signal.md §P, §D). The warmup
	// returned 1, 0, 1, 1: not all alike, so stop_alike lets it branch.

	// Output:
	// rollouts 6 unspent 0 reused 16
	// node  1 <-  0 pass 0 "x=\\b"  reward 0 done false
	// node  2 <-  1 pass 0 "oxed"   reward 0 done false
	// node  3 <-  2 pass 0 "{5}"    reward 1 done true
	// node  4 <-  0 pass 0 "x=\\b"  reward 0 done false
	// node  5 <-  4 pass 0 "oxed"   reward 0 done false
	// node  6 <-  5 pass 0 "{4}"    reward 0 done true
	// node  7 <-  0 pass 0 "x=\\b"  reward 0 done false
	// node  8 <-  7 pass 0 "oxed"   reward 0 done false
	// node  9 <-  8 pass 0 "{5}"    reward 1 done true
	// node 10 <-  0 pass 0 "x=\\b"  reward 0 done false
	// node 11 <- 10 pass 0 "oxed"   reward 0 done false
	// node 12 <- 11 pass 0 "{5}"    reward 1 done true
	// node 13 <-  2 pass 1 "{5}"    reward 1 done true
	// node 14 <- 11 pass 1 "{5}"    reward 1 done true
}
