package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

// goroutines counts live goroutines, leaving out fasthttp's idle-connection cleaner: it
// ends by itself within MaxIdleConnDuration (3 s) once the pool is empty.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	all := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(all, "\n\n") {
		if !strings.Contains(g, "connsCleaner") {
			n++
		}
	}
	return n, all
}

// waitGoroutines waits (bounded) for the goroutine count to fall back to at most want.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, all := goroutines()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left, want at most %d:\n%s", n, want, all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServerEchoingTheAPIKeyIsRedacted(t *testing.T) {
	const key = "sk-reliability-4f2b9e7c1a"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` +
			strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `"}}`))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, func(cfg *Config) { cfg.APIKey = key })
	err := c.Do(context.Background(), Call{Method: "POST", Endpoint: "/v1/completions", Body: map[string]any{}}, nil)
	require.Error(t, err)
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.NotContains(t, err.Error(), key)
	assert.Contains(t, err.Error(), "Incorrect API key provided: <redacted>")
	var re *RequestError
	require.True(t, errors.As(err, &re))
	assert.NotContains(t, re.Message, key)
}

// TestFaultsLeaveNoGoroutineOrConnection drives every kind of failure (hang cancelled by
// the context, hang past a deadline, a connection closed without a response, a body cut
// off, 503s past the retry limit) concurrently, then closes the client: the goroutine
// count returns to where it was and the server sees no open connection.
func TestFaultsLeaveNoGoroutineOrConnection(t *testing.T) {
	var mu sync.Mutex
	open := map[string]bool{}
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			// Reading the body to its end lets net/http notice the client closing the
			// connection (it then cancels r.Context()).
			_, _ = io.ReadAll(r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/close":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		case "/truncated":
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte(`{"text": "half`))
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c.RemoteAddr().String()] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c.RemoteAddr().String())
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)

	before, _ := goroutines()
	c := newClient(t, srv.URL, nil)
	var wg sync.WaitGroup
	const rounds = 20
	for i := range rounds {
		for _, ep := range []string{"/hang", "/close", "/truncated", "/503", "/ok"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Only the hangs need the short deadline; the rest may queue behind them for
				// a request slot.
				timeout := time.Minute
				if ep == "/hang" {
					timeout = 200 * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				if ep == "/hang" && i%2 == 0 {
					// Half the hangs are cancelled, not timed out.
					go func() { time.Sleep(20 * time.Millisecond); cancel() }()
				}
				err := c.Do(ctx, Call{Method: "POST", Endpoint: ep, Body: []byte(`{}`)}, func([]byte) error { return nil })
				if ep == "/ok" {
					assert.NoError(t, err)
					return
				}
				assert.Error(t, err, ep)
			}()
		}
	}
	wg.Wait()
	st := c.Stats()
	assert.Equal(t, int64(5*rounds), st.Calls)
	assert.Equal(t, int64(4*rounds), st.Failures)
	assert.Zero(t, st.InFlight)
	c.Close()
	// The idle pool is dropped by Close; connections a call was still returning are
	// closed by fasthttp's idle cleaner within MaxIdleConnDuration.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(open)
		mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	assert.Empty(t, open, "connections still open at the server")
	mu.Unlock()
	waitGoroutines(t, before)
}

// FuzzErrorMessage: any error body gives a short, valid UTF-8 message and never panics.
func FuzzErrorMessage(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"error":{"message":"x"}}`, `{"error":"boom"}`, `{"message":"m"}`, `{"detail":[{"loc":1}]}`,
		`{"error":{"message":null}}`, "\xff\xfe", `{"error":{"message":"` + strings.Repeat("é", 400) + `"}}`, `[1,2`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := errorMessage(body)
		if !utf8.ValidString(msg) {
			t.Fatalf("message %q is not valid UTF-8", msg)
		}
		// A quoted snippet of 300 bytes can grow to 4x when escaped.
		if len(msg) > 8+4*snippetBytes+8 {
			t.Fatalf("message is %d bytes", len(msg))
		}
	})
}

// FuzzParseRetryAfter: any header value gives a delay within [0, 1e6 s] or an HTTP date's
// distance, never a negative one.
func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"", "1", "0.5", "-3", "1e309", "NaN", "Inf", "Wed, 21 Oct 2015 07:28:00 GMT", "  7 "} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v, now); d < 0 {
			t.Fatalf("Retry-After %q gave %v", v, d)
		}
	})
}

// TestCloseWithCallsInFlight: calls running when the client closes finish normally, later
// calls are refused, and the connections they used are closed when they return (not after
// the idle timeout).
func TestCloseWithCallsInFlight(t *testing.T) {
	var mu sync.Mutex
	open := 0
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open++
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	const calls = 8
	errs := make(chan error, calls)
	for range calls {
		go func() {
			errs <- c.Do(context.Background(), Call{Method: "POST", Endpoint: "/x", Body: []byte(`{}`)}, func([]byte) error { return nil })
		}()
	}
	require.Eventually(t, func() bool { return c.Stats().InFlight == calls }, time.Minute, time.Millisecond)
	c.Close()
	close(release)
	for range calls {
		assert.NoError(t, <-errs, "a call in flight at Close finishes normally")
	}
	err := c.Do(context.Background(), Call{Method: "GET", Endpoint: "/x"}, nil)
	assert.ErrorContains(t, err, "is closed")
	assert.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return open == 0 }, time.Minute, 5*time.Millisecond,
		"connections of calls that ended after Close are closed at once")
}
