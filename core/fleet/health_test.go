package fleet

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

func checked(model, tokenizer string) Check {
	return func(context.Context) (Checked, error) {
		return Checked{Info: model, Capacity: 4, Model: model, Tokenizer: tokenizer}, nil
	}
}

func TestStartupCheckRefusesReplicasOfAnotherModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     Check
		match string
	}{
		{"model", checked("Qwen/Qwen3-8B", "tok"), `replica 2 of 2 (b) serves model "Qwen/Qwen3-8B", tokenizer "tok", but replica 1 (a) serves model "Qwen/Qwen3-4B", tokenizer "tok": the model differs`},
		{"tokenizer", checked("Qwen/Qwen3-4B", "other"), `replica 2 of 2 (b) serves model "Qwen/Qwen3-4B", tokenizer "other", but replica 1 (a) serves model "Qwen/Qwen3-4B", tokenizer "tok": the tokenizer differs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(Config{Replicas: []Replica{
				{Name: "a", Policy: newGated(), Check: checked("Qwen/Qwen3-4B", "tok")},
				{Name: "b", Policy: newGated(), Check: tc.b},
			}})
			require.NoError(t, err)
			_, err = f.StartupCheck(context.Background())
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tc.match)
		})
	}
}

func TestStartupCheckRecordsEveryReplicasModel(t *testing.T) {
	f, err := New(Config{Replicas: []Replica{
		{Name: "a", Policy: newGated(), Check: checked("m", "")},
		{Name: "b", Policy: newGated(), Check: checked("m", "")},
		{Name: "c", Policy: newGated(), Check: checked("", "")}, // a router that does not say
	}})
	require.NoError(t, err)
	_, err = f.StartupCheck(context.Background())
	require.NoError(t, err)
	var models []string
	for _, r := range f.Load().Replicas {
		models = append(models, r.Model)
	}
	assert.Equal(t, []string{"m", "m", ""}, models)
}

// answering is a fake replica that answers every request with answer.
type answering struct {
	answer func() (*generate.Result, error)
	calls  atomic.Int64
}

func (a *answering) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	a.calls.Add(1)
	return a.answer()
}

func good() (*generate.Result, error) {
	return &generate.Result{Tokens: []uint32{1, 2}, Logprobs: []float64{-0.5, -1}, StopReason: generate.StopReasonStop}, nil
}

func TestABrokenReplicaIsTakenOutAndItsTreesMove(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func() (*generate.Result, error)
	}{
		// What SGLang and vLLM never send (health.go): a stop with no tokens.
		{"zero-token stop", func() (*generate.Result, error) {
			return &generate.Result{Tokens: []uint32{}, Logprobs: []float64{}, StopReason: generate.StopReasonStop}, nil
		}},
		{"aborts every request", func() (*generate.Result, error) {
			return &generate.Result{Tokens: []uint32{}, Logprobs: []float64{}, StopReason: generate.StopReasonAbort, AbortMessage: "Abort in waiting queue"}, nil
		}},
		{"ids outside the vocabulary", func() (*generate.Result, error) {
			return &generate.Result{Tokens: []uint32{1, testVocab}, Logprobs: []float64{-0.5, -1}, StopReason: generate.StopReasonStop}, nil
		}},
		{"timeout", func() (*generate.Result, error) {
			return nil, status.Wrap(status.Timeout, context.DeadlineExceeded, "sglang: request deadline")
		}},
		{"unreadable", func() (*generate.Result, error) {
			return nil, status.Errorf(status.Backend, "sglang: malformed JSON")
		}},
		{"empty", func() (*generate.Result, error) {
			return &generate.Result{Tokens: []uint32{}, Logprobs: []float64{}, StopReason: generate.StopReasonLength}, nil
		}},
		{"no logprobs", func() (*generate.Result, error) {
			return &generate.Result{Tokens: []uint32{1, 2}, Logprobs: []float64{math.NaN(), math.NaN()}, StopReason: generate.StopReasonStop}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, ok := &answering{answer: tc.answer}, &answering{answer: good}
			f, err := New(Config{Replicas: []Replica{{Name: "bad", Policy: bad}, {Name: "ok", Policy: ok}}, Cooldown: time.Hour, VocabSize: testVocab})
			require.NoError(t, err)
			for tree := uint64(1); tree <= 8; tree++ {
				for k := 0; k < 3; k++ {
					res, err := f.Generate(context.Background(), generate.Request{Tree: tree})
					require.NoError(t, err, "every request is served by the healthy replica")
					assert.Equal(t, []float64{-0.5, -1}, res.Logprobs)
				}
			}
			l := f.Load()
			assert.True(t, l.Replicas[0].Down)
			assert.Equal(t, int64(1), l.Replicas[0].Downs)
			assert.Equal(t, int64(DefaultUnhealthyAfter), bad.calls.Load(), "no request after it went down")
			assert.False(t, l.Replicas[1].Down)
			assert.Positive(t, l.Moved, "the trees that started on it moved")
		})
	}
}

// testVocab is the vocabulary size of the health tests' fleets.
const testVocab = 1000

// A single replica's malformed answer is an error naming the replica and what it answered.
func TestAMalformedAnswerOfTheOnlyReplicaIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  generate.Result
		want string
	}{
		{"zero-token stop", generate.Result{Tokens: []uint32{}, Logprobs: []float64{}, StopReason: generate.StopReasonStop},
			`fleet: replica 1 of 1 (http://a) answered finish reason "stop" with no tokens`},
		{"id outside the vocabulary", generate.Result{Tokens: []uint32{5, 7, 1000}, Logprobs: []float64{-1, -1, -1}, StopReason: generate.StopReasonLength},
			"fleet: replica 1 of 1 (http://a) answered token id 1000 (generated token 3 of 3), outside the vocabulary of 1000 ids (0 to 999)"},
		{"a huge id", generate.Result{Tokens: []uint32{math.MaxUint32}, Logprobs: []float64{-1}, StopReason: generate.StopReasonStop},
			"answered token id 4294967295 (generated token 1 of 1), outside the vocabulary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answering{answer: func() (*generate.Result, error) { r := tc.res; return &r, nil }}
			f, err := New(Config{Replicas: []Replica{{Name: "http://a", Policy: a}}, VocabSize: testVocab})
			require.NoError(t, err)
			res, err := f.Generate(context.Background(), generate.Request{Tree: 1})
			assert.Nil(t, res)
			require.Error(t, err)
			assert.Equal(t, status.Backend, status.CodeOf(err))
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, int64(1), f.Load().Replicas[0].Failed)
		})
	}
}

// The last replica's abort stays an abort (a collection's stop_on_abort sees it), and an
// id inside the vocabulary or a vocabulary left unset checks nothing.
func TestAnAbortOfTheOnlyReplicaIsReturnedAndAGoodAnswerPasses(t *testing.T) {
	abort := &answering{answer: func() (*generate.Result, error) {
		return &generate.Result{Tokens: []uint32{3}, Logprobs: []float64{-1}, StopReason: generate.StopReasonAbort}, nil
	}}
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: abort}}})
	require.NoError(t, err)
	res, err := f.Generate(context.Background(), generate.Request{Tree: 1})
	require.NoError(t, err)
	assert.Equal(t, generate.StopReasonAbort, res.StopReason)
	for _, vocab := range []int{0, 3} {
		g, err := New(Config{Replicas: []Replica{{Name: "a", Policy: &answering{answer: good}}}, VocabSize: vocab})
		require.NoError(t, err)
		_, err = g.Generate(context.Background(), generate.Request{Tree: 1})
		require.NoError(t, err, "ids 1 and 2 are inside a vocabulary of %d", vocab)
	}
}

func TestAReplicaComesBackAfterAGoodProbe(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	flaky := &answering{answer: func() (*generate.Result, error) {
		if broken.Load() {
			return nil, status.Errorf(status.Backend, "sglang: malformed JSON")
		}
		return good()
	}}
	f, err := New(Config{Replicas: []Replica{{Name: "flaky", Policy: flaky}, {Name: "ok", Policy: &answering{answer: good}}},
		Cooldown: time.Hour, UnhealthyAfter: 1})
	require.NoError(t, err)
	cooldownLeft := func() time.Duration {
		f.mu.Lock()
		defer f.mu.Unlock()
		return time.Until(f.reps[0].downUntil)
	}
	endCooldown := func() {
		f.mu.Lock()
		f.reps[0].downUntil = time.Time{}
		f.mu.Unlock()
	}
	_, err = f.Generate(context.Background(), generate.Request{Tree: 1})
	require.NoError(t, err)
	assert.True(t, f.Load().Replicas[0].Down)
	assert.InDelta(t, time.Hour.Seconds(), cooldownLeft().Seconds(), 60)
	// While it is down it gets nothing.
	_, _ = f.Generate(context.Background(), generate.Request{Tree: 2})
	assert.Equal(t, int64(1), flaky.calls.Load())
	// The probe after the cooldown fails: down again, for twice as long.
	endCooldown()
	for tree := uint64(3); flaky.calls.Load() < 2 && tree < 10; tree++ {
		_, err = f.Generate(context.Background(), generate.Request{Tree: tree})
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2), f.Load().Replicas[0].Downs)
	assert.InDelta(t, 2*time.Hour.Seconds(), cooldownLeft().Seconds(), 60)
	// Healthy again: the next probe brings it back, and its cooldown starts over.
	broken.Store(false)
	endCooldown()
	for tree := uint64(10); f.Load().Replicas[0].Down && tree < 20; tree++ {
		_, err = f.Generate(context.Background(), generate.Request{Tree: tree})
		require.NoError(t, err)
	}
	assert.False(t, f.Load().Replicas[0].Down)
	f.mu.Lock()
	assert.Equal(t, 1, f.reps[0].backoff)
	f.mu.Unlock()
}

func TestARequestErrorSaysNothingAboutTheReplica(t *testing.T) {
	wrong := &answering{answer: func() (*generate.Result, error) {
		return nil, status.Errorf(status.InvalidArgument, "sglang: HTTP 400: context length exceeded")
	}}
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: wrong}, {Name: "b", Policy: wrong}}})
	require.NoError(t, err)
	for k := 0; k < 5; k++ {
		_, err := f.Generate(context.Background(), generate.Request{Tree: 1})
		assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	}
	assert.False(t, f.Load().Replicas[0].Down)
	assert.Equal(t, int64(5), wrong.calls.Load(), "not sent to the other replica")
}

// A limit below the number of replicas is shared, not split: every replica serves, the
// limit holds over them together, and a replica that goes down leaves its trees to another.
func TestALimitBelowTheReplicasIsShared(t *testing.T) {
	bad := &answering{answer: func() (*generate.Result, error) { return nil, status.Errorf(status.Backend, "sglang: malformed JSON") }}
	a, b := &answering{answer: good}, &answering{answer: good}
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: a}, {Name: "b", Policy: b}}, Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, 1, f.Capacity())
	for tree := uint64(1); tree <= 4; tree++ {
		_, err := f.Generate(context.Background(), generate.Request{Tree: tree})
		require.NoError(t, err)
	}
	assert.Positive(t, a.calls.Load())
	assert.Positive(t, b.calls.Load(), "the second replica serves too")

	f, err = New(Config{Replicas: []Replica{{Name: "bad", Policy: bad}, {Name: "ok", Policy: a}}, Limit: 1, Cooldown: time.Hour})
	require.NoError(t, err)
	for tree := uint64(1); tree <= 6; tree++ {
		_, err := f.Generate(context.Background(), generate.Request{Tree: tree})
		require.NoError(t, err, "failed over to the healthy replica")
	}
	assert.True(t, f.Load().Replicas[0].Down)
}

func TestASharedLimitHoldsOverTheReplicas(t *testing.T) {
	g1, g2 := newGated(), newGated()
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: g1}, {Name: "b", Policy: g2}}, Limit: 3})
	require.NoError(t, err)
	done := make(chan struct{})
	for tree := uint64(1); tree <= 8; tree++ {
		go func() {
			_, _ = f.Generate(context.Background(), generate.Request{Tree: tree})
			done <- struct{}{}
		}()
	}
	waitFor(t, "the limit's requests in flight and the rest queued", func() bool {
		l := f.Load()
		return l.InFlight == 3 && l.Queued == 5
	})
	close(g1.release)
	close(g2.release)
	for k := 0; k < 8; k++ {
		<-done
	}
	assert.Equal(t, 3, f.Load().PeakInFlight)
}

func TestCloseEndsAdmissions(t *testing.T) {
	f, err := New(Config{Replicas: []Replica{{Name: "a", Policy: newGated(), Capacity: 1}}})
	require.NoError(t, err)
	_, err = f.Admit(context.Background(), 1)
	require.NoError(t, err)
	waiting := make(chan error)
	go func() {
		_, err := f.Admit(context.Background(), 1) // no room: waits
		waiting <- err
	}()
	waitFor(t, "the second admission waits", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.admitting) == 1
	})
	f.Close()
	err = <-waiting
	assert.Equal(t, status.InvalidHandle, status.CodeOf(err))
	assert.Contains(t, err.Error(), "closed")
	_, err = f.Admit(context.Background(), 1)
	assert.Equal(t, status.InvalidHandle, status.CodeOf(err), "and after")
}
