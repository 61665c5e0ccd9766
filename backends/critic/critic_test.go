package critic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

// valueServer answers every POST with body, after recording the request.
func valueServer(t *testing.T, handler func(contexts []string) (int, string)) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			Contexts []string `json:"contexts"`
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &req); err != nil || req.Contexts == nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"bad request"}`)
			return
		}
		code, body := handler(req.Contexts)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestHTTP(t *testing.T) {
	tests := []struct {
		name     string
		contexts []string
		status   int
		body     string
		want     []float64
		wantErr  status.Code
		contains string
	}{
		{"ok", []string{"a", "b"}, 200, `{"values": [0.25, 0.75]}`, []float64{0.25, 0.75}, status.OK, ""},
		{"empty batch", []string{}, 200, `{"values": []}`, []float64{}, status.OK, ""},
		{"too few", []string{"a", "b"}, 200, `{"values": [0.5]}`, nil, status.Backend, "returned 1 values for 2 contexts"},
		{"too many", []string{"a"}, 200, `{"values": [0.5, 0.5]}`, nil, status.Backend, "returned 2 values for 1 contexts"},
		{"nan", []string{"a"}, 200, `{"values": [NaN]}`, nil, status.Backend, "NaN and Infinity are not JSON numbers"},
		{"no values", []string{"a"}, 200, `{"value": [0.5]}`, nil, status.Backend, `no "values" list`},
		{"not json", []string{"a"}, 200, `<html>`, nil, status.Backend, "finite numbers"},
		{"null value", []string{"a"}, 200, `{"values": [null]}`, []float64{0}, status.OK, ""},
		{"client error", []string{"a"}, 422, `{"detail": "contexts too long"}`, nil, status.InvalidArgument, "contexts too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := valueServer(t, func([]string) (int, string) { return tt.status, tt.body })
			c, err := HTTP(srv.URL, 5*time.Second)
			require.NoError(t, err)
			defer c.Close()
			got, err := c.Score(context.Background(), tt.contexts)
			require.Equal(t, tt.wantErr, status.CodeOf(err), "%v", err)
			if tt.wantErr != status.OK {
				assert.Contains(t, err.Error(), tt.contains)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestHTTPRetriesTransientFailure(t *testing.T) {
	var n atomic.Int64
	srv, calls := valueServer(t, func(ctx []string) (int, string) {
		if n.Add(1) == 1 {
			return 503, `{"error":"warming up"}`
		}
		return 200, `{"values": [0.5]}`
	})
	c, err := HTTP(srv.URL, 10*time.Second)
	require.NoError(t, err)
	defer c.Close()
	got, err := c.Score(context.Background(), []string{"x"})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5}, got)
	assert.Equal(t, int64(2), calls.Load())
}

func TestHTTPTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := HTTP(srv.URL, 50*time.Millisecond)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Score(context.Background(), []string{"x"})
	assert.Equal(t, status.Timeout, status.CodeOf(err), "%v", err)

	c2, err := HTTP(srv.URL, 0)
	require.NoError(t, err)
	defer c2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = c2.Score(ctx, []string{"x"})
	assert.Equal(t, status.Cancelled, status.CodeOf(err), "%v", err)
}

func TestHTTPBadConfig(t *testing.T) {
	_, err := HTTP("localhost:8000", 0)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	_, err = HTTP("http://127.0.0.1:1", -time.Second)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	c, err := HTTP("http://127.0.0.1:1/value", 0)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:1/value", c.URL())
	c.Close()
	_, err = c.Score(context.Background(), []string{"x"})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err), "a closed critic refuses calls")
}
