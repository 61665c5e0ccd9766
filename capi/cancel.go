package main

/*
#include "focus.h"
*/
import "C"

import "context"

// canceller is the handle kind behind focus_cancel_new: a context a blocking call runs
// under, cancelled from another thread with focus_cancel (or by releasing the handle).
type canceller struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (c *canceller) Close() error { c.cancel(); return nil }

// callContext is the context for one blocking call: the canceller's, or Background when
// the caller passed 0 (no cancellation).
func callContext(h C.focus_handle) (context.Context, error) {
	if h == 0 {
		return context.Background(), nil
	}
	c, err := handleAs[*canceller](uint64(h), "cancel token")
	if err != nil {
		return nil, err
	}
	return c.ctx, nil
}

//export focus_cancel_new
func focus_cancel_new(out *C.focus_handle, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		ctx, cancel := context.WithCancel(context.Background())
		*out = C.focus_handle(handles.put(&canceller{ctx: ctx, cancel: cancel}))
		return nil
	})
}

//export focus_cancel
func focus_cancel(h C.focus_handle, errOut **C.char) C.focus_status {
	return guard(errOut, func() error {
		c, err := handleAs[*canceller](uint64(h), "cancel token")
		if err != nil {
			return err
		}
		c.cancel()
		return nil
	})
}
