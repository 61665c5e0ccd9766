package collect

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// TestStopOnAbortOverHTTP: with the Go SGLang client, an "abort" finish on one request
// (what Slime's /abort_request gives every request in flight) ends the collection by
// closing the other requests' connections: the server sees each of them cancelled by the
// client (its handlers block until then, so the test would hang otherwise) and receives
// no request after the abort.
func TestStopOnAbortOverHTTP(t *testing.T) {
	const warmup = 6
	var (
		requests, disconnected, afterAbort atomic.Int64
		aborted                            atomic.Bool
		mu                                 sync.Mutex
		waiting                            int
		ready                              = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.ReadAll(r.Body) // (net/http notices a closed connection only once the body is read)
		if aborted.Load() {
			afterAbort.Add(1)
		}
		if requests.Add(1) == 1 {
			<-ready // every other warmup request is on the wire
			aborted.Store(true)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"text":"x","output_ids":[11],"meta_info":{"id":"r","finish_reason":{"type":"abort","message":"Abort by /abort_request."},` +
				`"prompt_tokens":8,"completion_tokens":1,"output_token_logprobs":[[-0.5,11,null]]}}`))
			return
		}
		mu.Lock()
		waiting++
		if waiting == warmup-1 {
			close(ready)
		}
		mu.Unlock()
		select {
		case <-r.Context().Done(): // the client closed the connection
			disconnected.Add(1)
		case <-time.After(20 * time.Second): // a guard against hanging the suite, not a timing check
		}
	}))
	defer srv.Close()
	client, err := sglang.New(sglang.Config{BaseURL: srv.URL})
	require.NoError(t, err)
	defer client.Close()

	cfg := baseConfig(search.Selective(16, warmup))
	cfg.StopOnAbort, cfg.MaxRetries = true, 1
	res, err := Run(context.Background(), cfg, client, newFakeEnv(), &fakeCritic{})
	assert.Equal(t, status.Collection, status.CodeOf(err), "%v", err)
	require.Len(t, res.Failures, 1)
	assert.True(t, res.Failures[0].Aborted)
	assert.Equal(t, int64(warmup), requests.Load())
	assert.Zero(t, afterAbort.Load(), "no request after the abort")
	srv.CloseClientConnections()
	srv.Close() // waits for the handlers: each saw its request cancelled
	assert.Equal(t, int64(warmup-1), disconnected.Load())
}
