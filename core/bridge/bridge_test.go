package bridge

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

func poll(t *testing.T, b *Bridge) Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := b.Poll(ctx)
	require.NoError(t, err)
	return r
}

type callResult struct {
	payload []byte
	err     error
}

func callAsync(b *Bridge, ctx context.Context, kind string, object int64, payload string) chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		p, err := b.Call(ctx, kind, object, []byte(payload))
		ch <- callResult{p, err}
	}()
	return ch
}

func TestPollManyTakesEveryQueuedRequestOldestFirst(t *testing.T) {
	b := New()
	defer b.Close()
	var calls []chan callResult
	for i := range 5 {
		calls = append(calls, callAsync(b, context.Background(), KindEnvStep, int64(i), `{}`))
		require.Eventually(t, func() bool { return b.Queued() == i+1 }, time.Minute, time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := b.PollMany(ctx, 3)
	require.NoError(t, err)
	rest, err := b.PollMany(ctx, 100)
	require.NoError(t, err)
	var objects []int64
	for _, r := range append(first, rest...) {
		objects = append(objects, r.Object)
		require.NoError(t, b.Resolve(r.ID, []byte(`{"reward":0}`)))
	}
	assert.Equal(t, []int64{0, 1, 2, 3, 4}, objects)
	assert.Len(t, first, 3)
	for _, c := range calls {
		assert.NoError(t, (<-c).err)
	}
	assert.Equal(t, 0, b.Pending())

	last := callAsync(b, context.Background(), KindEnvFork, 9, `{}`)
	one, err := b.PollMany(ctx, 0) // a limit below one means one
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.NoError(t, b.Resolve(one[0].ID, []byte(`{"object":10}`)))
	assert.NoError(t, (<-last).err)
}

func TestCallResolve(t *testing.T) {
	b := New()
	defer b.Close()
	done := callAsync(b, context.Background(), KindCriticScore, 7, `{"contexts":["a"]}`)
	r := poll(t, b)
	assert.Equal(t, uint64(1), r.ID)
	assert.Equal(t, KindCriticScore, r.Kind)
	assert.Equal(t, int64(7), r.Object)
	assert.JSONEq(t, `{"contexts":["a"]}`, string(r.Payload))
	assert.Equal(t, 1, b.Pending())
	assert.Equal(t, 0, b.Queued())
	require.NoError(t, b.Resolve(r.ID, []byte(`{"values":[0.5]}`)))
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, `{"values":[0.5]}`, string(got.payload))
	assert.Equal(t, 0, b.Pending())

	envelope, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":1,"kind":"critic.score","object":7,"payload":{"contexts":["a"]}}`, string(envelope))
}

func TestFail(t *testing.T) {
	tests := []struct {
		name string
		code status.Code
		want status.Code
	}{
		{"backend", status.Backend, status.Backend},
		{"invalid argument", status.InvalidArgument, status.InvalidArgument},
		{"ok is not a failure code", status.OK, status.Internal},
		{"unknown code", status.Code(99), status.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New()
			defer b.Close()
			done := callAsync(b, context.Background(), KindEnvStep, 1, `{}`)
			r := poll(t, b)
			require.NoError(t, b.Fail(r.ID, tt.code, "ValueError: bad action"))
			got := <-done
			assert.Equal(t, tt.want, status.CodeOf(got.err))
			assert.Contains(t, got.err.Error(), "ValueError: bad action")
		})
	}
}

func TestBadAnswers(t *testing.T) {
	b := New()
	done := callAsync(b, context.Background(), KindEnvReset, 1, `{}`)
	// Not polled yet: the id is not known to the Python side.
	require.Eventually(t, func() bool { return b.Queued() == 1 }, time.Minute, time.Millisecond)
	assert.Equal(t, status.InvalidHandle, status.CodeOf(b.Resolve(1, nil)), "an unpolled call cannot be answered")
	r := poll(t, b)
	tests := []struct {
		name string
		do   func() error
	}{
		{"unknown id", func() error { return b.Resolve(999, []byte(`{}`)) }},
		{"zero id", func() error { return b.Fail(0, status.Backend, "x") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, status.InvalidHandle, status.CodeOf(tt.do()))
		})
	}
	require.NoError(t, b.Resolve(r.ID, []byte(`{}`)))
	<-done
	assert.Equal(t, status.InvalidHandle, status.CodeOf(b.Resolve(r.ID, []byte(`{}`))), "duplicate resolve")
	assert.Equal(t, status.InvalidHandle, status.CodeOf(b.Fail(r.ID, status.Backend, "late")), "fail after resolve")
	b.Close()
	assert.Equal(t, status.InvalidHandle, status.CodeOf(b.Resolve(r.ID, nil)), "resolve after close")
}

func TestCancelBeforePollWithdraws(t *testing.T) {
	b := New()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := callAsync(b, ctx, KindPolicyGenerate, 3, `{}`)
	require.Eventually(t, func() bool { return b.Queued() == 1 }, time.Minute, time.Millisecond)
	cancel()
	got := <-done
	assert.Equal(t, status.Cancelled, status.CodeOf(got.err))
	assert.Equal(t, 0, b.Queued(), "the request is withdrawn, no cancel notice needed")
	assert.Equal(t, 0, b.Pending())
}

func TestCancelAfterPollNotifies(t *testing.T) {
	b := New()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	done := callAsync(b, ctx, KindPolicyGenerate, 3, `{}`)
	r := poll(t, b)
	got := <-done // the deadline passes while "Python" is working
	assert.Equal(t, status.Timeout, status.CodeOf(got.err))
	assert.Contains(t, got.err.Error(), "policy.generate call 1 to object 3 abandoned")
	c := poll(t, b)
	assert.Equal(t, Request{ID: r.ID, Kind: KindCancel, Object: 3, Payload: json.RawMessage(`{}`)}, c)
	assert.Equal(t, status.InvalidHandle, status.CodeOf(b.Resolve(r.ID, []byte(`{}`))), "a late answer is refused")
}

func TestCloseFailsPendingAndStopsPollers(t *testing.T) {
	b := New()
	first := callAsync(b, context.Background(), KindEnvFork, 1, `{}`)
	second := callAsync(b, context.Background(), KindEnvFork, 2, `{}`)
	require.Eventually(t, func() bool { return b.Queued() == 2 }, time.Minute, time.Millisecond)
	served := poll(t, b).Object
	b.Notify(KindEnvClose, 9, []byte(`{}`))
	type polled struct {
		reqs []Request
		err  error
	}
	pollers := make(chan polled, 3)
	for range 3 {
		go func() {
			var p polled
			for range 10 {
				r, err := b.Poll(context.Background())
				if err != nil {
					p.err = err
					break
				}
				p.reqs = append(p.reqs, r)
			}
			pollers <- p
		}()
	}
	time.Sleep(10 * time.Millisecond)
	b.Close()
	b.Close() // idempotent
	for _, ch := range []chan callResult{first, second} {
		got := <-ch
		assert.True(t, IsClosed(got.err))
		assert.Equal(t, status.Cancelled, status.CodeOf(got.err))
	}
	var cancels, closes []int64
	for range 3 {
		select {
		case p := <-pollers:
			assert.True(t, IsClosed(p.err), "%v", p.err)
			for _, r := range p.reqs {
				switch r.Kind {
				case KindCancel:
					cancels = append(cancels, r.Object)
				case KindEnvClose:
					closes = append(closes, r.Object)
				}
			}
		case <-time.After(time.Minute): // a guard against hanging the suite, not a timing check
			t.Fatal("a poller did not wake up on Close")
		}
	}
	// The call taken above was being served: Python is told to cancel it.
	// The other may have been taken before Close too; the env.close survives.
	assert.Contains(t, cancels, served)
	assert.Equal(t, []int64{9}, closes)
	_, err := b.Poll(context.Background())
	assert.True(t, IsClosed(err))
	_, err = b.Call(context.Background(), KindEnvReset, 1, nil)
	assert.True(t, IsClosed(err))
	b.Notify(KindEnvClose, 1, []byte(`{}`)) // dropped, no panic
	assert.True(t, b.Closed())
}

func TestPollTimeout(t *testing.T) {
	b := New()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := b.Poll(ctx)
	assert.Equal(t, status.Timeout, status.CodeOf(err))
	assert.False(t, IsClosed(err))
}

func TestNotify(t *testing.T) {
	b := New()
	defer b.Close()
	b.Notify(KindEnvClose, 5, []byte(`{}`))
	r := poll(t, b)
	assert.Equal(t, KindEnvClose, r.Kind)
	assert.Equal(t, int64(5), r.Object)
	assert.Equal(t, 0, b.Pending(), "a notification expects no answer")
	assert.Equal(t, status.InvalidHandle, status.CodeOf(b.Resolve(r.ID, nil)))
}

func TestManyCallersManyPollers(t *testing.T) {
	b := New()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var servers sync.WaitGroup
	for range 4 {
		servers.Add(1)
		go func() {
			defer servers.Done()
			for {
				r, err := b.Poll(ctx)
				if err != nil {
					return
				}
				if r.Kind == KindCancel {
					continue
				}
				_ = b.Resolve(r.ID, r.Payload) // echo
			}
		}()
	}
	var callers sync.WaitGroup
	for i := range 200 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			cctx := context.Background()
			if i%10 == 0 {
				var c context.CancelFunc
				cctx, c = context.WithTimeout(cctx, time.Duration(i%3)*time.Millisecond)
				defer c()
			}
			payload := []byte(`{"i":` + string(rune('0'+i%10)) + `}`)
			got, err := b.Call(cctx, KindCriticScore, int64(i), payload)
			if err == nil {
				assert.Equal(t, string(payload), string(got))
			} else {
				assert.Contains(t, []status.Code{status.Timeout, status.Cancelled}, status.CodeOf(err))
			}
		}()
	}
	callers.Wait()
	assert.Equal(t, 0, b.Pending())
	cancel()
	servers.Wait()
}
