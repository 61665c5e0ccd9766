package main

/*
#include "focus.h"
*/
import "C"

import (
	"context"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/focus-go/focus-go/core/status"
)

// The calls that wait (on a server or a collection) take a ticket. Ticket 0 blocks the
// calling thread. Any other ticket starts the call in a goroutine and returns at once; when
// the call ends its outputs and error message are written to the caller's slots and
// (ticket, status) joins the process's completion queue, which focus_async_wait drains. So
// one caller thread waits on any number of calls and collections.

// completion is one finished call.
type completion struct {
	ticket uint64
	code   C.focus_status
}

// asyncCalls is the process's calls in flight and its completion queue.
type asyncCalls struct {
	mu      sync.Mutex
	running map[uint64]context.CancelFunc
	done    []completion
	wake    chan struct{} // a token after every post; waiters re-check done

	notifyOnce sync.Once
	notify     [2]int // a non-blocking pipe: a byte is written when done stops being empty
	notifyErr  error
}

var calls = newAsyncCalls()

func newAsyncCalls() *asyncCalls {
	return &asyncCalls{running: map[uint64]context.CancelFunc{}, wake: make(chan struct{}, 1)}
}

// run runs one call. prepare validates and copies the inputs on the caller's thread and
// returns the work; with ticket 0 the work runs there too, otherwise in a goroutine.
func run(ticket C.uint64_t, errOut *C.focus_bytes, prepare func() (func(ctx context.Context) error, error)) C.focus_status {
	var work func(ctx context.Context) error
	code := guard(errOut, func() error {
		w, err := prepare()
		if err != nil {
			return err
		}
		if ticket == 0 {
			return w(context.Background())
		}
		work = w
		return nil
	})
	if code != C.FOCUS_OK || ticket == 0 {
		return code
	}
	return guard(errOut, func() error { return calls.start(uint64(ticket), errOut, work) })
}

func (a *asyncCalls) start(ticket uint64, errOut *C.focus_bytes, work func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	if _, dup := a.running[ticket]; dup {
		a.mu.Unlock()
		cancel()
		return status.Errorf(status.InvalidArgument, "ticket %d is already in flight", ticket)
	}
	a.running[ticket] = cancel
	a.mu.Unlock()
	go func() {
		code := guard(errOut, func() error { return work(ctx) })
		cancel()
		a.mu.Lock()
		delete(a.running, ticket)
		first := len(a.done) == 0
		a.done = append(a.done, completion{ticket, code})
		a.mu.Unlock()
		select {
		case a.wake <- struct{}{}:
		default:
		}
		if first {
			a.signal()
		}
	}()
	return nil
}

// fd is the read end of the notification pipe, made on first use. The pipe holds a byte
// whenever a call was posted since the reader last emptied it; the reader reads the pipe
// before it drains the queue, so no post goes unannounced.
func (a *asyncCalls) fd() (int, error) {
	a.notifyOnce.Do(func() {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
			a.notifyErr = status.Wrap(status.Internal, err, "focus_async_fd: pipe")
			return
		}
		a.mu.Lock()
		a.notify = p
		a.mu.Unlock()
		a.signal() // calls may already be waiting
	})
	return a.notify[0], a.notifyErr
}

// signal makes the notification pipe readable (a full pipe already is).
func (a *asyncCalls) signal() {
	a.mu.Lock()
	w := a.notify[1]
	a.mu.Unlock()
	if w > 0 {
		_, _ = syscall.Write(w, []byte{1})
	}
}

func (a *asyncCalls) cancel(ticket uint64) {
	a.mu.Lock()
	cancel := a.running[ticket]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// wait returns up to max finished calls, waiting up to timeout for the first (forever when
// negative); none when the timeout passes.
func (a *asyncCalls) wait(timeout time.Duration, max int) []completion {
	var expired <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		a.mu.Lock()
		if n := min(max, len(a.done)); n > 0 {
			out := append([]completion(nil), a.done[:n]...)
			a.done = append(a.done[:0], a.done[n:]...)
			more := len(a.done) > 0
			a.mu.Unlock()
			if more {
				select {
				case a.wake <- struct{}{}:
				default:
				}
			}
			return out
		}
		a.mu.Unlock()
		select {
		case <-a.wake:
		case <-expired:
			return nil
		}
	}
}

//export focus_async_wait
func focus_async_wait(timeoutMS C.int64_t, max C.size_t, tickets *C.uint64_t, codes *C.focus_status,
	n *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		if tickets == nil || codes == nil || n == nil || max == 0 {
			return status.Errorf(status.InvalidArgument, "focus_async_wait: tickets, codes and n must not be NULL and max must be positive")
		}
		timeout := time.Duration(timeoutMS) * time.Millisecond
		if timeoutMS < 0 {
			timeout = -1
		}
		done := calls.wait(timeout, int(max))
		ts := unsafe.Slice((*uint64)(unsafe.Pointer(tickets)), int(max))
		cs := unsafe.Slice((*C.focus_status)(unsafe.Pointer(codes)), int(max))
		for i, c := range done {
			ts[i], cs[i] = c.ticket, c.code
		}
		*n = C.size_t(len(done))
		return nil
	})
}

//export focus_async_fd
func focus_async_fd(fd *C.int, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		if fd == nil {
			return status.Errorf(status.InvalidArgument, "focus_async_fd: fd is NULL")
		}
		r, err := calls.fd()
		*fd = C.int(r)
		return err
	})
}

//export focus_async_cancel
func focus_async_cancel(ticket C.uint64_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		calls.cancel(uint64(ticket))
		return nil
	})
}
