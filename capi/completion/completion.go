// Package completion is the C ABI's completion queue: the calls that wait (on a server or
// a collection) run in goroutines under a caller-chosen ticket, and each one's (ticket,
// status) joins one process-wide queue when it ends. The caller drains the queue with Wait,
// and a non-blocking notification pipe (FD) becomes readable whenever the queue stops
// being empty, so one event loop waits on any number of calls without a thread each.
//
// It is pure Go (no cgo) so that it is unit-tested on its own; capi keeps only the thin
// focus_async_* exports over one Queue. A Queue is safe for concurrent use. A ticket is
// in flight from Start until its completion is posted, and may be reused after that.
package completion

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/focus-go/focus-go/core/status"
)

// Completion is one finished call: its ticket and the status its work returned.
type Completion struct {
	Ticket uint64
	Code   status.Code
}

// Queue is the calls in flight and the completions not yet taken.
type Queue struct {
	mu      sync.Mutex
	running map[uint64]context.CancelFunc
	done    []Completion
	wake    chan struct{} // a token after every post; waiters re-check done

	notifyOnce sync.Once
	notify     [2]int // a non-blocking pipe: a byte is written when done stops being empty
	notifyErr  error
}

// New returns an empty queue; its notification pipe is made on the first FD.
func New() *Queue {
	return &Queue{running: map[uint64]context.CancelFunc{}, wake: make(chan struct{}, 1)}
}

// Start runs work in a goroutine under ticket and posts its status when it returns. work
// gets a context that Cancel(ticket) ends. A panic in work is posted as status.Internal
// (the C ABI's guard normally recovers it first and keeps the message). A ticket already
// in flight is refused with status.InvalidArgument and work is not run.
func (q *Queue) Start(ticket uint64, work func(ctx context.Context) status.Code) error {
	ctx, cancel := context.WithCancel(context.Background())
	q.mu.Lock()
	if _, dup := q.running[ticket]; dup {
		q.mu.Unlock()
		cancel()
		return status.Errorf(status.InvalidArgument, "ticket %d is already in flight", ticket)
	}
	q.running[ticket] = cancel
	q.mu.Unlock()
	go func() {
		code := protect(ctx, work)
		cancel()
		q.mu.Lock()
		delete(q.running, ticket)
		first := len(q.done) == 0
		q.done = append(q.done, Completion{ticket, code})
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
		if first {
			q.signal()
		}
	}()
	return nil
}

func protect(ctx context.Context, work func(ctx context.Context) status.Code) (code status.Code) {
	defer func() {
		if recover() != nil {
			code = status.Internal
		}
	}()
	return work(ctx)
}

// FD is the read end of the notification pipe, made on first use. The pipe holds a byte
// whenever a call was posted since the reader last emptied it; a reader that empties the
// pipe before it drains the queue misses no post.
func (q *Queue) FD() (int, error) {
	q.notifyOnce.Do(func() {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
			q.notifyErr = status.Wrap(status.Internal, err, "focus_async_fd: pipe")
			return
		}
		q.mu.Lock()
		q.notify = p
		q.mu.Unlock()
		q.signal() // calls may already be waiting
	})
	return q.notify[0], q.notifyErr
}

// signal makes the notification pipe readable (a full pipe already is).
func (q *Queue) signal() {
	q.mu.Lock()
	w := q.notify[1]
	q.mu.Unlock()
	if w > 0 {
		_, _ = syscall.Write(w, []byte{1})
	}
}

// Cancel ends the context of the call in flight under ticket; an unknown or finished
// ticket is ignored (its completion, if any, is still posted once).
func (q *Queue) Cancel(ticket uint64) {
	q.mu.Lock()
	cancel := q.running[ticket]
	q.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Wait returns up to max finished calls in the order they ended, waiting up to timeout
// for the first (forever when negative); none when the timeout passes.
func (q *Queue) Wait(timeout time.Duration, max int) []Completion {
	var expired <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		q.mu.Lock()
		if n := min(max, len(q.done)); n > 0 {
			out := append([]Completion(nil), q.done[:n]...)
			q.done = append(q.done[:0], q.done[n:]...)
			more := len(q.done) > 0
			q.mu.Unlock()
			if more {
				select {
				case q.wake <- struct{}{}:
				default:
				}
			}
			return out
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-expired:
			return nil
		}
	}
}
