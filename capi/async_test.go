package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

// waitN drains n completions from a, keyed by ticket.
func waitN(t *testing.T, a *asyncCalls, n int) map[uint64]status.Code {
	t.Helper()
	got := map[uint64]status.Code{}
	for len(got) < n {
		done := a.wait(5*time.Second, 8)
		require.NotEmpty(t, done, "a started call was never posted")
		for _, c := range done {
			got[c.ticket] = status.Code(c.code)
		}
	}
	return got
}

func TestAsyncCallsPostEveryOutcome(t *testing.T) {
	a := newAsyncCalls()
	require.NoError(t, a.start(1, nil, func(context.Context) error { return nil }))
	require.NoError(t, a.start(2, nil, func(context.Context) error { return status.Errorf(status.Backend, "server said no") }))
	require.NoError(t, a.start(3, nil, func(context.Context) error { panic("boom") }))
	assert.Equal(t, map[uint64]status.Code{1: status.OK, 2: status.Backend, 3: status.Internal}, waitN(t, a, 3))
	assert.Empty(t, a.wait(0, 8), "each call is posted once")
}

func TestAsyncCallsCancelAndTickets(t *testing.T) {
	a := newAsyncCalls()
	started := make(chan struct{})
	require.NoError(t, a.start(7, nil, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	<-started
	err := a.start(7, nil, func(context.Context) error { return nil })
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err), "a ticket in flight cannot be reused")
	assert.Empty(t, a.wait(10*time.Millisecond, 8), "nothing has ended yet")

	a.cancel(7)
	a.cancel(99) // unknown tickets are ignored
	assert.Equal(t, map[uint64]status.Code{7: status.Cancelled}, waitN(t, a, 1))
	require.NoError(t, a.start(7, nil, func(context.Context) error { return nil }), "a posted ticket is free again")
	assert.Equal(t, map[uint64]status.Code{7: status.OK}, waitN(t, a, 1))
}

func TestAsyncWaitTakesAtMostMax(t *testing.T) {
	a := newAsyncCalls()
	for ticket := uint64(1); ticket <= 5; ticket++ {
		require.NoError(t, a.start(ticket, nil, func(context.Context) error { return nil }))
	}
	got := map[uint64]bool{}
	for len(got) < 5 {
		done := a.wait(5*time.Second, 2)
		require.NotEmpty(t, done)
		assert.LessOrEqual(t, len(done), 2)
		for _, c := range done {
			assert.False(t, got[c.ticket], "ticket %d posted twice", c.ticket)
			got[c.ticket] = true
		}
	}
}

// readable reports whether the notification pipe holds a byte, emptying it. A post writes
// the byte just after it queues the call, so a byte is waited for briefly.
func readable(t *testing.T, fd int) bool {
	t.Helper()
	buf := make([]byte, 64)
	for deadline := time.Now().Add(200 * time.Millisecond); ; time.Sleep(time.Millisecond) {
		n, err := syscall.Read(fd, buf)
		if err != syscall.EAGAIN {
			require.NoError(t, err)
			return n > 0
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func TestAsyncNotificationPipeAnnouncesEveryPost(t *testing.T) {
	a := newAsyncCalls()
	require.NoError(t, a.start(1, nil, func(context.Context) error { return nil }))
	waitN(t, a, 1) // posted and taken before anyone asked for the pipe
	fd, err := a.fd()
	require.NoError(t, err)
	assert.True(t, readable(t, fd), "a pipe made late is readable: calls may be waiting")
	assert.False(t, readable(t, fd))

	release := make(chan struct{})
	require.NoError(t, a.start(2, nil, func(context.Context) error { <-release; return nil }))
	assert.False(t, readable(t, fd), "nothing posted yet")
	close(release)
	assert.Equal(t, map[uint64]status.Code{2: status.OK}, waitN(t, a, 1))
	assert.True(t, readable(t, fd), "the post made the pipe readable")

	// A reader that read the pipe and then drained the queue misses no later post.
	require.NoError(t, a.start(3, nil, func(context.Context) error { return nil }))
	assert.Equal(t, map[uint64]status.Code{3: status.OK}, waitN(t, a, 1))
	assert.True(t, readable(t, fd))
	assert.Empty(t, a.wait(0, 8))
}
