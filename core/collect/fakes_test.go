package collect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// fakePolicy answers deterministically from the request: every path is
// `length` generated tokens long (then it stops with "stop"; 0 = never
// stops), and token i of a response is a hash of the request seed and i.
// Optional random delays shuffle completion order.
type fakePolicy struct {
	promptLen int
	length    int
	delay     time.Duration // upper bound of a random delay per call
	fixed     time.Duration // fixed delay per call
	rng       *rand.Rand
	rngMu     sync.Mutex
	fail      func(req generate.Request, generated int) error
	mutate    func(res *generate.Result)

	calls, inFlight, maxInFlight atomic.Int64
	maxTokensSeen                atomic.Int64
	overRemaining                atomic.Int64 // requests whose max_tokens exceeded T_max - generated
	tMax                         int
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (p *fakePolicy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	p.calls.Add(1)
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		m := p.maxInFlight.Load()
		if n <= m || p.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	wait := p.fixed
	if p.delay > 0 {
		p.rngMu.Lock()
		wait += time.Duration(p.rng.Int64N(int64(p.delay)))
		p.rngMu.Unlock()
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "fake: generate")
		}
	}
	if req.Params.MaxTokens == nil || req.Params.Seed == nil {
		return nil, status.Errorf(status.InvalidArgument, "fake: request without max_tokens or seed")
	}
	maxTokens, seed := *req.Params.MaxTokens, uint64(*req.Params.Seed)
	generated := len(req.Tokens) - p.promptLen
	if int64(maxTokens) > p.maxTokensSeen.Load() {
		p.maxTokensSeen.Store(int64(maxTokens))
	}
	if p.tMax > 0 && generated+maxTokens > p.tMax {
		p.overRemaining.Add(1)
	}
	if p.fail != nil {
		if err := p.fail(req, generated); err != nil {
			return nil, err
		}
	}
	count, stop := maxTokens, generate.StopReasonLength
	if p.length > 0 && generated+count >= p.length {
		count, stop = p.length-generated, generate.StopReasonStop
	}
	res := &generate.Result{Tokens: make([]uint32, count), Logprobs: make([]float64, count), StopReason: stop, ExactGeneration: true}
	for i := range count {
		res.Tokens[i] = uint32(10 + splitmix(seed^uint64(i)<<20)%90)
		res.Logprobs[i] = -float64(res.Tokens[i]) / 100
	}
	res.Text = fmt.Sprintf("<%d tokens>", count)
	if p.mutate != nil {
		p.mutate(res)
	}
	return res, nil
}

// envStats is shared by an env and all its forks.
type envStats struct {
	forks, closes, doubleCloses, concurrent atomic.Int64
	resets                                  atomic.Int64
}

// fakeEnv ends an episode on a finished chunk with reward = parity of the
// last token. Hooks inject observations and failures.
type fakeEnv struct {
	stats  *envStats
	steps  int
	busy   atomic.Bool
	closed atomic.Bool
	// hooks, shared by forks
	step func(e *fakeEnv, chunk *action.TokenChunk) (Step, error, bool)
	fork func(e *fakeEnv) error
	obs  Observation
}

func newFakeEnv() *fakeEnv { return &fakeEnv{stats: &envStats{}} }

func (e *fakeEnv) enter() func() {
	if !e.busy.CompareAndSwap(false, true) {
		e.stats.concurrent.Add(1)
		return func() {}
	}
	return func() { e.busy.Store(false) }
}

func (e *fakeEnv) Reset(ctx context.Context) (Observation, error) {
	defer e.enter()()
	e.stats.resets.Add(1)
	e.steps = 0
	return e.obs, nil
}

func (e *fakeEnv) Step(ctx context.Context, act action.Action) (Step, error) {
	defer e.enter()()
	if act.Kind != action.KindTokens || act.Chunk == nil {
		return Step{}, status.Errorf(status.InvalidArgument, "fake env: not a token chunk")
	}
	e.steps++
	if e.step != nil {
		if s, err, handled := e.step(e, act.Chunk); handled {
			return s, err
		}
	}
	if !act.Chunk.Finished {
		return Step{}, nil
	}
	r := 0.0
	if n := len(act.Chunk.Tokens); n > 0 {
		r = float64(act.Chunk.Tokens[n-1] % 2)
	}
	return Step{Reward: r, Done: true}, nil
}

func (e *fakeEnv) Fork(ctx context.Context) (Env, error) {
	defer e.enter()()
	if e.fork != nil {
		if err := e.fork(e); err != nil {
			return nil, err
		}
	}
	e.stats.forks.Add(1)
	return &fakeEnv{stats: e.stats, steps: e.steps, step: e.step, fork: e.fork}, nil
}

func (e *fakeEnv) Close() {
	if e.closed.Swap(true) {
		e.stats.doubleCloses.Add(1)
		return
	}
	e.stats.closes.Add(1)
}

// fakeCritic predicts a value from the context length; hooks inject failures.
type fakeCritic struct {
	calls    atomic.Int64
	contexts atomic.Int64
	score    func(ctx context.Context, contexts []string) ([]float64, error)
}

func (c *fakeCritic) Score(ctx context.Context, contexts []string) ([]float64, error) {
	c.calls.Add(1)
	c.contexts.Add(int64(len(contexts)))
	if c.score != nil {
		return c.score(ctx, contexts)
	}
	out := make([]float64, len(contexts))
	for i, s := range contexts {
		out[i] = float64(len(s)%7) / 7
	}
	return out, nil
}

// byteCodec treats every token id as one byte.
type byteCodec struct{}

func (byteCodec) Encode(text string, addSpecial bool) ([]uint32, error) {
	ids := make([]uint32, len(text))
	for i := range text {
		ids[i] = uint32(text[i])
	}
	return ids, nil
}

func (byteCodec) Decode(ids []uint32, skipSpecial bool) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}

// stepForkEnv is a fakeEnv that also forks in its step call, as the bridge's remote env
// does; its forks are stepForkEnvs too.
type stepForkEnv struct {
	*fakeEnv
	stepForks *atomic.Int64
}

func (e stepForkEnv) Fork(ctx context.Context) (Env, error) {
	twin, err := e.fakeEnv.Fork(ctx)
	if err != nil {
		return nil, err
	}
	return stepForkEnv{twin.(*fakeEnv), e.stepForks}, nil
}

func (e stepForkEnv) StepFork(ctx context.Context, act action.Action) (Step, Env, error) {
	step, err := e.Step(ctx, act)
	if err != nil || step.Done {
		return step, nil, err
	}
	twin, err := e.Fork(ctx)
	if err != nil {
		return Step{}, nil, err
	}
	e.stepForks.Add(1)
	return step, twin, nil
}
