package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/focus-go/focus-go/core/status"
)

// handleTable maps opaque ids to Go objects. Ids start at 1 and are never reused, so a
// stale id can only miss, never reach another object.
type handleTable struct {
	mu   sync.Mutex
	next uint64
	objs map[uint64]any
}

var handles = &handleTable{objs: map[uint64]any{}}

func (t *handleTable) put(v any) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	t.objs[t.next] = v
	return t.next
}

func (t *handleTable) get(h uint64) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.objs[h]
	if !ok {
		return nil, invalidHandle(h)
	}
	return v, nil
}

// release removes h and closes the object if it owns resources.
func (t *handleTable) release(h uint64) error {
	t.mu.Lock()
	v, ok := t.objs[h]
	delete(t.objs, h)
	t.mu.Unlock()
	if !ok {
		return invalidHandle(h)
	}
	if c, ok := v.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (t *handleTable) live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.objs)
}

func invalidHandle(h uint64) error {
	if h == 0 {
		return status.Errorf(status.InvalidHandle, "handle 0 is never valid")
	}
	return status.Errorf(status.InvalidHandle, "handle %d is unknown or already released", h)
}

// handleAs fetches h and checks it holds a T; kind names T in the error.
func handleAs[T any](h uint64, kind string) (T, error) {
	var zero T
	v, err := handles.get(h)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, status.Errorf(status.InvalidHandle, "handle %d is a %s, not a %s", h, typeName(v), kind)
	}
	return t, nil
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
