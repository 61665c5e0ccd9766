package mathenv

import (
	"context"
	"strings"
	"testing"

	"github.com/focus-go/focus-go/core/action"
)

// BenchmarkEpisode1024 measures what the engine asks of a tree's MathEnv per rollout of
// four 256-token segments: a fork and a step for each segment's reply, the last one
// decoding the 1,024 tokens and grading them (byteDecode stands in for the tokenizer).
func BenchmarkEpisode1024(b *testing.B) {
	text := strings.Repeat(`Let $x = \frac{a}{b}$, so that $x^2 + 1 = 2$ and `, 40)
	text = text[:1024-len(`\boxed{\frac{1}{2}}.`)] + `\boxed{\frac{1}{2}}.`
	var steps []action.Action
	for i, c := range []string{text[:256], text[256:512], text[512:768], text[768:]} {
		steps = append(steps, chunk(c, i == 3))
	}
	ctx := context.Background()
	root := New(`\boxed{0.5}`, byteDecode) // a tree's env: its rollouts fork from it
	b.ReportAllocs()
	for b.Loop() {
		cur := root
		for i, act := range steps {
			f, err := cur.Fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			cur = f.(*Env)
			st, err := cur.Step(ctx, act)
			if err != nil {
				b.Fatal(err)
			}
			if i == len(steps)-1 && st.Reward != Correct {
				b.Fatalf("reward %v, want %v", st.Reward, Correct)
			}
		}
	}
}
