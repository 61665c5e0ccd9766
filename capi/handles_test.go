package main

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

// TestMain fails the suite if any test leaves a handle live.
func TestMain(m *testing.M) {
	code := m.Run()
	if n := handles.live(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "capi: %d handles left live after the suite\n", n)
		code = 1
	}
	os.Exit(code)
}

type closer struct{ closed int }

// testBox is a second kind of handle object (selftest.go's box is only in selftest builds).
type testBox struct{ value any }

func (c *closer) Close() error { c.closed++; return nil }

func TestHandleLifecycle(t *testing.T) {
	c := &closer{}
	h := handles.put(c)
	require.NotZero(t, h)

	got, err := handleAs[*closer](h, "closer")
	require.NoError(t, err)
	assert.Same(t, c, got)

	_, err = handleAs[*testBox](h, "test box")
	assert.Equal(t, status.InvalidHandle, status.CodeOf(err))
	assert.ErrorContains(t, err, "not a test box")

	require.NoError(t, handles.release(h))
	assert.Equal(t, 1, c.closed, "release closes what the handle owns")

	tests := []struct {
		name   string
		handle uint64
		want   string
	}{
		{"zero", 0, "handle 0 is never valid"},
		{"freed", h, "unknown or already released"},
		{"never issued", 1 << 60, "unknown or already released"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := handles.get(tt.handle)
			assert.ErrorContains(t, err, tt.want)
			err = handles.release(tt.handle)
			assert.Equal(t, status.InvalidHandle, status.CodeOf(err))
		})
	}
}

func TestHandlesAreNeverReused(t *testing.T) {
	a := handles.put(1)
	require.NoError(t, handles.release(a))
	b := handles.put(2)
	defer handles.release(b)
	assert.Greater(t, b, a)
	_, err := handles.get(a)
	assert.Error(t, err)
}

func TestConcurrentHandles(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				h := handles.put(&testBox{value: g*1000 + i})
				b, err := handleAs[*testBox](h, "test box")
				assert.NoError(t, err)
				assert.Equal(t, g*1000+i, b.value)
				assert.NoError(t, handles.release(h))
			}
		}(g)
	}
	wg.Wait()
}
