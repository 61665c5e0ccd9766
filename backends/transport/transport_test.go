package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

// fastRetry keeps retry tests fast: backoff of a few milliseconds.
var fastRetry = RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}

// scripted serves the i-th request (0-based) with steps[min(i, len-1)].
type scripted struct {
	steps []func(w http.ResponseWriter, r *http.Request)
	n     atomic.Int64
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(s.n.Add(1) - 1)
	if i >= len(s.steps) {
		i = len(s.steps) - 1
	}
	s.steps[i](w, r)
}

func reply(code int, body string, headers ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func newClient(t *testing.T, url string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{Name: "test", BaseURL: url, Retry: fastRetry}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func getOK(ctx context.Context, c *Client) error {
	return c.Do(ctx, Call{Method: "POST", Endpoint: "/generate", Body: map[string]int{"x": 1}}, func(b []byte) error {
		var v map[string]any
		return JSON.Unmarshal(b, &v)
	})
}

const ok = `{"ok":true}`

func TestStatusHandling(t *testing.T) {
	tests := []struct {
		name         string
		steps        []func(http.ResponseWriter, *http.Request)
		code         status.Code
		requests     int64
		contains     []string
		contextLimit bool
		minElapsed   time.Duration
	}{
		{name: "500 retried then success", steps: steps(reply(500, `{"error":{"message":"boom"}}`), reply(200, ok)), code: status.OK, requests: 2},
		{name: "503 twice then success", steps: steps(reply(503, `{"error":{"message":"The request queue is full."}}`), reply(503, ""), reply(200, ok)), code: status.OK, requests: 3},
		{name: "502 and 504 retried", steps: steps(reply(502, "bad gateway"), reply(504, ""), reply(200, ok)), code: status.OK, requests: 3},
		{name: "408 router queue timeout retried", steps: steps(reply(408, ""), reply(200, ok)), code: status.OK, requests: 2},
		{name: "429 status-only retried with backoff", steps: steps(reply(429, ""), reply(200, ok)), code: status.OK, requests: 2},
		{name: "429 honours Retry-After", steps: steps(reply(429, `{"error":{"message":"slow down"}}`, "Retry-After", "0.3"), reply(200, ok)),
			code: status.OK, requests: 2, minElapsed: 300 * time.Millisecond},
		{name: "429 Retry-After beyond the limit gives up at once", steps: steps(reply(429, `{"error":{"message":"slow down"}}`, "Retry-After", "120")),
			code: status.Backend, requests: 1, contains: []string{"HTTP 429", "slow down", "Retry-After 2m0s exceeds the limit"}},
		{name: "500 persistent", steps: steps(reply(500, `{"object":"error","message":"internal generation error","type":"InternalServerError","param":null,"code":500}`)),
			code: status.Backend, requests: 4, contains: []string{"test: POST http://127.0.0.1:", "/generate: HTTP 500 Internal Server Error: internal generation error (after 3 retries)"}},
		{name: "non-JSON body snippet", steps: steps(reply(502, "<html>upstream down</html>"), reply(502, "<html>upstream down</html>")),
			code: status.Backend, requests: 4, contains: []string{"HTTP 502 Bad Gateway", `body: "<html>upstream down</html>"`}},
		{name: "400 vLLM nested context length", code: status.InvalidArgument, requests: 1, contextLimit: true,
			steps:    steps(reply(400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 64 output tokens and your prompt contains at least 8129 input tokens, for a total of at least 8193 tokens. Please reduce the length of the input prompt or the number of requested output tokens.","type":"BadRequestError","param":"input_tokens","code":400}}`)),
			contains: []string{"HTTP 400 Bad Request: context length exceeded: This model's maximum context length is 8192"}},
		{name: "400 vLLM flat context length", code: status.InvalidArgument, requests: 1, contextLimit: true,
			steps:    steps(reply(400, `{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2723 tokens (1699 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`)),
			contains: []string{"context length exceeded", "2723 tokens"}},
		{name: "400 SGLang context length", code: status.InvalidArgument, requests: 1, contextLimit: true,
			steps:    steps(reply(400, `{"error":{"message":"The input (43028 tokens) is longer than the model's context length (40960 tokens)."}}`)),
			contains: []string{"context length exceeded: The input (43028 tokens)"}},
		{name: "400 other bad request", code: status.InvalidArgument, requests: 1,
			steps:    steps(reply(400, `{"error":{"message":"Requested sample logprobs of 50, which is greater than max allowed: 20"}}`)),
			contains: []string{"HTTP 400 Bad Request: Requested sample logprobs of 50"}},
		{name: "404 unknown model", code: status.NotFound, requests: 1,
			steps:    steps(reply(404, `{"error":{"message":"The model `+"`nope`"+` does not exist.","type":"NotFoundError","param":null,"code":404}}`)),
			contains: []string{"HTTP 404 Not Found: The model `nope` does not exist."}},
		{name: "FastAPI detail", code: status.InvalidArgument, requests: 1,
			steps: steps(reply(422, `{"detail":"input_ids must be a list"}`)), contains: []string{"HTTP 422", "input_ids must be a list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&scripted{steps: tt.steps})
			defer srv.Close()
			c := newClient(t, srv.URL, nil)
			start := time.Now()
			err := getOK(context.Background(), c)
			assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
			assert.Equal(t, tt.requests, c.Stats().Requests)
			assert.Equal(t, tt.requests-1, c.Stats().Retries)
			assert.Equal(t, tt.contextLimit, IsContextLength(err))
			for _, s := range tt.contains {
				assert.Contains(t, fmt.Sprint(err), s)
			}
			assert.GreaterOrEqual(t, time.Since(start), tt.minElapsed)
			if err != nil {
				var re *RequestError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, "POST", re.Method)
			}
		})
	}
}

func steps(s ...func(http.ResponseWriter, *http.Request)) []func(http.ResponseWriter, *http.Request) {
	return s
}

func TestConnectionRefusedIsRetriedThenBackend(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c := newClient(t, "http://"+addr, nil)
	err = getOK(context.Background(), c)
	require.Error(t, err)
	assert.Equal(t, status.Backend, status.CodeOf(err))
	assert.Contains(t, err.Error(), "test: POST http://"+addr+"/generate: cannot connect")
	assert.Contains(t, err.Error(), "(after 3 retries)")
	assert.Equal(t, int64(4), c.Stats().Requests)
}

// hijack closes the connection without a response: a reset before the first byte.
func hijack(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// brokenBody promises 1000 bytes and sends 20: a response that started, then broke off.
func brokenBody(w http.ResponseWriter, _ *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"text\":\"2+2=4\",\"met")
	_ = buf.Flush()
	_ = conn.Close()
}

func TestConnectionFailures(t *testing.T) {
	tests := []struct {
		name     string
		steps    []func(http.ResponseWriter, *http.Request)
		code     status.Code
		requests int64
		contains string
	}{
		{name: "closed before a response is retried", steps: steps(hijack, reply(200, ok)), code: status.OK, requests: 2},
		{name: "body broken off is not retried", steps: steps(brokenBody, reply(200, ok)), code: status.Backend, requests: 1,
			contains: "response broke off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&scripted{steps: tt.steps})
			defer srv.Close()
			c := newClient(t, srv.URL, nil)
			err := getOK(context.Background(), c)
			assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
			assert.Equal(t, tt.requests, c.Stats().Requests)
			if tt.contains != "" {
				assert.ErrorContains(t, err, tt.contains)
			}
		})
	}
}

func TestStaleKeepAliveConnectionIsReplacedWithoutARetry(t *testing.T) {
	srv := httptest.NewServer(&scripted{steps: steps(reply(200, ok))})
	defer srv.Close()
	c := newClient(t, srv.URL, func(cfg *Config) { cfg.Retry.MaxRetries = -1 })
	require.NoError(t, getOK(context.Background(), c))
	srv.CloseClientConnections() // the server drops the idle keep-alive connection
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, getOK(context.Background(), c))
	assert.Equal(t, int64(0), c.Stats().Retries)
}

// blocking holds each request until the client disconnects (or 5 s), recording that it saw
// the disconnect: proof that cancelling closes the connection and so aborts server work.
type blocking struct {
	started      chan struct{}
	disconnected chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 16), disconnected: make(chan struct{}, 16)}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// net/http notices a disconnect only once the body has been read.
	_, _ = io.Copy(io.Discard, r.Body)
	b.started <- struct{}{}
	select {
	case <-r.Context().Done():
		b.disconnected <- struct{}{}
	case <-time.After(time.Minute): // long past any deadline a test sets
		reply(200, ok)(w, r)
	}
}

func TestCancellationAndDeadline(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		code status.Code
		want string
	}{
		{name: "cancel", code: status.Cancelled, want: "cancelled during await", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{name: "context deadline", code: status.Timeout, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 80*time.Millisecond)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBlocking()
			srv := httptest.NewServer(b)
			defer srv.Close()
			c := newClient(t, srv.URL, nil)
			ctx, cancel := tt.ctx()
			defer cancel()
			// The server answers 200 only after a minute: an error proves the call ended
			// at its context, whatever the machine's load.
			err := getOK(ctx, c)
			assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
			assert.Contains(t, err.Error(), "test: POST "+srv.URL+"/generate")
			assert.Contains(t, err.Error(), tt.want)
			select {
			case <-b.disconnected:
			case <-time.After(time.Minute): // a guard against hanging the suite, not a timing check
				t.Fatal("the server never saw the client disconnect")
			}
			assert.Equal(t, int64(1), c.Stats().Requests, "no retry after cancellation")
		})
	}
}

func TestConfigTimeoutBoundsTheCall(t *testing.T) {
	b := newBlocking()
	srv := httptest.NewServer(b)
	defer srv.Close()
	c := newClient(t, srv.URL, func(cfg *Config) { cfg.Timeout = 60 * time.Millisecond })
	err := getOK(context.Background(), c)
	assert.Equal(t, status.Timeout, status.CodeOf(err), "error: %v", err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline"), "error: %v", err)
}

func TestConcurrencyLimit(t *testing.T) {
	var inFlight, maxSeen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(15 * time.Millisecond)
		reply(200, ok)(w, r)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, func(cfg *Config) { cfg.MaxConcurrency = 3 })
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for range 24 {
		wg.Go(func() { errs <- getOK(context.Background(), c) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int64(3), maxSeen.Load(), "the server saw more (or fewer) than 3 requests at once")
	st := c.Stats()
	assert.Equal(t, int64(3), st.MaxInFlight)
	assert.Equal(t, int64(0), st.InFlight)
	assert.Equal(t, int64(24), st.Calls)
}

func TestWaitingForASlotHonoursTheContext(t *testing.T) {
	b := newBlocking()
	srv := httptest.NewServer(b)
	defer srv.Close()
	c := newClient(t, srv.URL, func(cfg *Config) { cfg.MaxConcurrency = 1 })
	first, cancelFirst := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- getOK(first, c) }()
	<-b.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := getOK(ctx, c)
	assert.Equal(t, status.Timeout, status.CodeOf(err))
	assert.ErrorContains(t, err, "while waiting for a free request slot (limit 1)")
	cancelFirst()
	assert.Equal(t, status.Cancelled, status.CodeOf(<-done))
}

func TestAPIKeyIsSentButNeverShown(t *testing.T) {
	const key = "sk-very-secret-123"
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Extra") + "|" + r.Header.Get("X-SMG-Routing-Key"))
		reply(401, `{"error":{"message":"Unauthorized"}}`)(w, r)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, func(cfg *Config) {
		cfg.APIKey = key
		cfg.Headers = map[string]string{"X-Extra": "1"}
	})
	err := c.Do(context.Background(), Call{Method: "POST", Endpoint: "/generate", Body: []byte(`{}`),
		Headers: map[string]string{"X-SMG-Routing-Key": "tree7"}}, func([]byte) error { return nil })
	assert.Equal(t, "Bearer "+key+"|1|tree7", got.Load())
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.Contains(t, err.Error(), "HTTP 401 Unauthorized: check the API key: Unauthorized")
	assert.NotContains(t, err.Error(), key)
	assert.NotContains(t, fmt.Sprintf("%+v %#v", err, c), key)
}

func TestDecodeErrors(t *testing.T) {
	srv := httptest.NewServer(&scripted{steps: steps(reply(200, ok))})
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	err := c.Do(context.Background(), Call{Endpoint: "/x"}, func([]byte) error { return errors.New("no good") })
	assert.Equal(t, status.Backend, status.CodeOf(err))
	assert.EqualError(t, err, "test: GET "+srv.URL+"/x: bad response body: no good")
	err = c.Do(context.Background(), Call{Endpoint: "/x"}, func([]byte) error {
		return status.Errorf(status.Backend, "test: response has 3 tokens, max_tokens was 2")
	})
	assert.EqualError(t, err, "test: response has 3 tokens, max_tokens was 2")
	assert.Equal(t, int64(2), c.Stats().Requests, "decode errors are not retried")
	assert.Equal(t, int64(2), c.Stats().Failures)
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name, url string
		mod       func(*Config)
		want      string
	}{
		{name: "no scheme", url: "localhost:8000", want: `base URL "localhost:8000" is not an http(s)://host[:port][/path] URL`},
		{name: "ftp", url: "ftp://h/", want: "is not an http(s)"},
		{name: "credentials", url: "http://user:hunter2@h:1/", want: "carries user credentials"},
		{name: "query", url: "http://h:1/?a=b", want: "must not have a query"},
		{name: "negative concurrency", url: "http://h:1", mod: func(c *Config) { c.MaxConcurrency = -1 }, want: "max concurrency -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Name: "test", BaseURL: tt.url}
			if tt.mod != nil {
				tt.mod(&cfg)
			}
			_, err := New(cfg)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.ErrorContains(t, err, tt.want)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
	c, err := New(Config{Name: "test", BaseURL: "https://example.com/v1/"})
	require.NoError(t, err)
	assert.Equal(t, "https://example.com/v1", c.BaseURL())
	c.Close()
	err = getOK(context.Background(), c)
	assert.ErrorContains(t, err, "client for https://example.com/v1 is closed")
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"1", time.Second}, {" 7 ", 7 * time.Second}, {"0.25", 250 * time.Millisecond},
		{"-3", 0}, {"soon", 0}, {"Fri, 02 Jan 2026 03:04:15 GMT", 10 * time.Second},
		{"Fri, 02 Jan 2026 03:04:00 GMT", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, parseRetryAfter(tt.in, now))
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{``, "(empty body)"},
		{`{"error":{"message":"m1"}}`, "m1"},
		{`{"object":"error","message":"m2","code":400}`, "m2"},
		{`{"error":"m3"}`, "m3"},
		{`{"detail":"m4"}`, "m4"},
		{`not json`, `body: "not json"`},
		{strings.Repeat("x", 400), `body: "` + strings.Repeat("x", 300) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, errorMessage([]byte(tt.body)))
		})
	}
}

func TestBackoffIsBoundedAndJittered(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	for n, limit := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d := p.backoff(n)
		assert.LessOrEqual(t, d, limit*time.Millisecond)
		assert.GreaterOrEqual(t, d, limit*time.Millisecond/2)
	}
	assert.Equal(t, DefaultMaxRetries, RetryPolicy{}.withDefaults().MaxRetries)
	assert.Equal(t, 0, RetryPolicy{MaxRetries: -1}.withDefaults().MaxRetries)
}
