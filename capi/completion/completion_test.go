package completion

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
func waitN(t *testing.T, q *Queue, n int) map[uint64]status.Code {
	t.Helper()
	got := map[uint64]status.Code{}
	for len(got) < n {
		done := q.Wait(5*time.Second, 8)
		require.NotEmpty(t, done, "a started call was never posted")
		for _, c := range done {
			got[c.Ticket] = c.Code
		}
	}
	return got
}

func TestAsyncCallsPostEveryOutcome(t *testing.T) {
	q := New()
	require.NoError(t, q.Start(1, func(context.Context) status.Code { return status.OK }))
	require.NoError(t, q.Start(2, func(context.Context) status.Code { return status.Backend }))
	require.NoError(t, q.Start(3, func(context.Context) status.Code { panic("boom") }))
	assert.Equal(t, map[uint64]status.Code{1: status.OK, 2: status.Backend, 3: status.Internal}, waitN(t, q, 3))
	assert.Empty(t, q.Wait(0, 8), "each call is posted once")
}

func TestAsyncCallsCancelAndTickets(t *testing.T) {
	q := New()
	started := make(chan struct{})
	require.NoError(t, q.Start(7, func(ctx context.Context) status.Code {
		close(started)
		<-ctx.Done()
		return status.CodeOf(ctx.Err())
	}))
	<-started
	err := q.Start(7, func(context.Context) status.Code { return status.OK })
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err), "a ticket in flight cannot be reused")
	assert.Empty(t, q.Wait(10*time.Millisecond, 8), "nothing has ended yet")

	q.Cancel(7)
	q.Cancel(99) // unknown tickets are ignored
	assert.Equal(t, map[uint64]status.Code{7: status.Cancelled}, waitN(t, q, 1))
	require.NoError(t, q.Start(7, func(context.Context) status.Code { return status.OK }), "a posted ticket is free again")
	assert.Equal(t, map[uint64]status.Code{7: status.OK}, waitN(t, q, 1))
}

func TestAsyncWaitTakesAtMostMax(t *testing.T) {
	q := New()
	for ticket := uint64(1); ticket <= 5; ticket++ {
		require.NoError(t, q.Start(ticket, func(context.Context) status.Code { return status.OK }))
	}
	got := map[uint64]bool{}
	for len(got) < 5 {
		done := q.Wait(5*time.Second, 2)
		require.NotEmpty(t, done)
		assert.LessOrEqual(t, len(done), 2)
		for _, c := range done {
			assert.False(t, got[c.Ticket], "ticket %d posted twice", c.Ticket)
			got[c.Ticket] = true
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
	q := New()
	require.NoError(t, q.Start(1, func(context.Context) status.Code { return status.OK }))
	waitN(t, q, 1) // posted and taken before anyone asked for the pipe
	fd, err := q.FD()
	require.NoError(t, err)
	assert.True(t, readable(t, fd), "a pipe made late is readable: calls may be waiting")
	assert.False(t, readable(t, fd))

	release := make(chan struct{})
	require.NoError(t, q.Start(2, func(context.Context) status.Code { <-release; return status.OK }))
	assert.False(t, readable(t, fd), "nothing posted yet")
	close(release)
	assert.Equal(t, map[uint64]status.Code{2: status.OK}, waitN(t, q, 1))
	assert.True(t, readable(t, fd), "the post made the pipe readable")

	// A reader that read the pipe and then drained the queue misses no later post.
	require.NoError(t, q.Start(3, func(context.Context) status.Code { return status.OK }))
	assert.Equal(t, map[uint64]status.Code{3: status.OK}, waitN(t, q, 1))
	assert.True(t, readable(t, fd))
	assert.Empty(t, q.Wait(0, 8))
}
