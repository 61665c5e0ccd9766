package main

/*
#include "focus.h"
*/
import "C"

import (
	"context"
	"time"
	"unsafe"

	"github.com/focus-go/focus-go/capi/completion"
	"github.com/focus-go/focus-go/core/status"
)

// The calls that wait (on a server or a collection) take a ticket. Ticket 0 blocks the
// calling thread. Any other ticket starts the call in a goroutine and returns at once; when
// the call ends its outputs and error message are written to the caller's slots and
// (ticket, status) joins the process's completion queue (capi/completion), which
// focus_async_wait drains. So one caller thread waits on any number of calls and
// collections.

var calls = completion.New()

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
	return guard(errOut, func() error {
		return calls.Start(uint64(ticket), func(ctx context.Context) status.Code {
			return status.Code(guard(errOut, func() error { return work(ctx) }))
		})
	})
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
		done := calls.Wait(timeout, int(max))
		ts := unsafe.Slice((*uint64)(unsafe.Pointer(tickets)), int(max))
		cs := unsafe.Slice((*C.focus_status)(unsafe.Pointer(codes)), int(max))
		for i, c := range done {
			ts[i], cs[i] = c.Ticket, C.focus_status(c.Code)
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
		r, err := calls.FD()
		*fd = C.int(r)
		return err
	})
}

//export focus_async_cancel
func focus_async_cancel(ticket C.uint64_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		calls.Cancel(uint64(ticket))
		return nil
	})
}
