package mathenv_test

import (
	"context"
	"fmt"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/mathenv"
)

func Example() {
	// A toy tokenizer: every token id is one byte.
	decode := func(ids []uint32) (string, error) {
		b := make([]byte, len(ids))
		for i, id := range ids {
			b[i] = byte(id)
		}
		return string(b), nil
	}
	tokens := func(s string) []uint32 {
		ids := make([]uint32, len(s))
		for i := range s {
			ids[i] = uint32(s[i])
		}
		return ids
	}
	ctx := context.Background()
	env := mathenv.New(`\boxed{\frac{1}{2}}`, decode)
	_, _ = env.Reset(ctx)
	step, _ := env.Step(ctx, action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: tokens("Half of 1 is \\box"), Finished: false}})
	fmt.Println(step.Reward, step.Done)
	step, _ = env.Step(ctx, action.Action{Kind: action.KindTokens, Chunk: &action.TokenChunk{Tokens: tokens("ed{0.5}."), Finished: true}})
	fmt.Println(step.Reward, step.Done, string(step.Info))

	fmt.Println(mathenv.Equal(`\dfrac{1}{2}`, ".5"), mathenv.Normalize(`\left( 1, 2 \right).`))
	// Output:
	// 0 false
	// 1 true {"answer":"0.5","label":"\\boxed{\\frac{1}{2}}","correct":true}
	// true (1,2)
}
