package transport

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	jsoniter "github.com/json-iterator/go"
	"github.com/valyala/fasthttp"

	"github.com/focus-go/focus-go/core/status"
)

// JSON is the json-iterator configuration every backend uses: no HTML escaping (token text
// goes to the server as is), shortest round-trip float formatting, sorted map keys so that
// request bodies are reproducible.
var JSON = jsoniter.Config{EscapeHTML: false, SortMapKeys: true, ValidateJsonRawMessage: true}.Froze()

// Defaults for the zero values of Config and RetryPolicy.
const (
	DefaultMaxConcurrency = 64
	// MaxConcurrencyLimit bounds MaxConcurrency (its slots are allocated up front).
	MaxConcurrencyLimit     = 1 << 20
	DefaultConnectTimeout   = 10 * time.Second
	DefaultMaxRetries       = 3
	DefaultBaseDelay        = 200 * time.Millisecond
	DefaultMaxDelay         = 10 * time.Second
	DefaultMaxRetryAfter    = 60 * time.Second
	DefaultMaxResponseBytes = 256 << 20
)

// RetryPolicy bounds the retries of transient failures (see the package comment for which
// failures are transient). The zero value means the defaults.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt: 0 means
	// DefaultMaxRetries, a negative value means no retries.
	MaxRetries int
	// BaseDelay is the backoff before the first retry; each further retry doubles it, up to
	// MaxDelay. The actual wait is drawn uniformly from [d/2, d] (jitter), so that clients
	// that failed together do not retry together.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxRetryAfter is the longest Retry-After a server may ask for; a longer one (or one
	// that would pass the context's deadline) ends the call with the server's error at once.
	MaxRetryAfter time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxRetries == 0 {
		p.MaxRetries = DefaultMaxRetries
	}
	if p.MaxRetries < 0 {
		p.MaxRetries = 0
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	return p
}

// backoff is the jittered wait before retry number n (0-based).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.MaxDelay
	if n < 30 && p.BaseDelay<<n < p.MaxDelay {
		d = p.BaseDelay << n
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// credential holds the Authorization header value. Its String and GoString hide it, and
// Client keeps it behind a pointer, so no %v / %+v / %#v of a Client prints it.
type credential struct{ header, key string }

func (*credential) String() string   { return "<redacted>" }
func (*credential) GoString() string { return "<redacted>" }

// Config describes one inference server.
type Config struct {
	// Name prefixes every error ("sglang", "vllm").
	Name string
	// BaseURL is http(s)://host:port with an optional path prefix that every endpoint is
	// appended to (e.g. "http://localhost:8000/v1"). It must not carry user:password.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey string
	// Headers are added to every request (after the defaults, so they may override them;
	// an explicit Authorization here wins over APIKey).
	Headers map[string]string
	// MaxConcurrency caps the requests in flight to this server (default 64).
	MaxConcurrency int
	// Timeout bounds one call, retries and backoff included, when the context has no
	// earlier deadline. Zero: only the context bounds it.
	Timeout time.Duration
	// ConnectTimeout bounds establishing a TCP (and TLS) connection (default 10s).
	ConnectTimeout time.Duration
	// Retry bounds retries of transient failures.
	Retry RetryPolicy
	// MaxResponseBytes caps a response body (default 256 MiB).
	MaxResponseBytes int
}

// Stats counts a Client's traffic since it was created. All fields are cumulative except
// InFlight (requests on the wire now) and MaxInFlight (the largest InFlight seen).
type Stats struct {
	Calls       int64 // Do calls
	Requests    int64 // HTTP requests sent, retries included
	Retries     int64 // requests that repeated an earlier failed one
	Failures    int64 // calls that returned an error
	InFlight    int64
	MaxInFlight int64
}

// Client talks to one server. Create it with New; it is safe for concurrent use.
type Client struct {
	name        string
	prefix      string      // scheme://host[:port]/path, no trailing slash, no credentials
	auth        *credential // a pointer, so that printing a Client never shows the key
	headers     map[string]string
	timeout     time.Duration
	retry       RetryPolicy
	concurrency int
	hc          *fasthttp.HostClient
	slots       chan struct{}
	closed      atomic.Bool

	calls, requests, retries, failures, inFlight, maxInFlight atomic.Int64
}

// New validates cfg and builds a Client. It does not contact the server.
func New(cfg Config) (*Client, error) {
	name := cfg.Name
	if name == "" {
		name = "transport"
	}
	u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, status.Errorf(status.InvalidArgument,
			"%s: base URL %q is not an http(s)://host[:port][/path] URL", name, redactURL(cfg.BaseURL))
	}
	if u.User != nil {
		return nil, status.Errorf(status.InvalidArgument,
			"%s: base URL for host %s carries user credentials; pass the key as the API key instead", name, u.Host)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, status.Errorf(status.InvalidArgument,
			"%s: base URL %q must not have a query or fragment", name, u.Redacted())
	}
	if cfg.MaxConcurrency > MaxConcurrencyLimit {
		return nil, status.Errorf(status.InvalidArgument,
			"%s: max concurrency %d is too large: at most %d requests in flight", name, cfg.MaxConcurrency, MaxConcurrencyLimit)
	}
	if cfg.MaxConcurrency < 0 {
		return nil, status.Errorf(status.InvalidArgument,
			"%s: max concurrency %d is negative; use 0 for the default %d", name, cfg.MaxConcurrency, DefaultMaxConcurrency)
	}
	if cfg.Timeout < 0 || cfg.ConnectTimeout < 0 {
		return nil, status.Errorf(status.InvalidArgument, "%s: timeouts must not be negative", name)
	}
	concurrency := cfg.MaxConcurrency
	if concurrency == 0 {
		concurrency = DefaultMaxConcurrency
	}
	connectTimeout := cfg.ConnectTimeout
	if connectTimeout == 0 {
		connectTimeout = DefaultConnectTimeout
	}
	maxBody := cfg.MaxResponseBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxResponseBytes
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	prefix := u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	c := &Client{
		name:        name,
		prefix:      prefix,
		headers:     cfg.Headers,
		timeout:     cfg.Timeout,
		retry:       cfg.Retry.withDefaults(),
		concurrency: concurrency,
		slots:       make(chan struct{}, concurrency),
	}
	if cfg.APIKey != "" {
		c.auth = &credential{header: "Bearer " + cfg.APIKey, key: cfg.APIKey}
	}
	c.hc = &fasthttp.HostClient{
		Addr:                      host,
		IsTLS:                     u.Scheme == "https",
		Name:                      "focus-go",
		MaxConns:                  concurrency,
		MaxConnWaitTimeout:        connectTimeout,
		MaxIdleConnDuration:       3 * time.Second, // below uvicorn's 5 s keep-alive, so pooled connections are rarely stale
		MaxResponseBodySize:       maxBody,
		MaxIdemponentCallAttempts: 1, // retries are ours: fasthttp must never resend
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 || timeout > connectTimeout {
				timeout = connectTimeout
			}
			return fasthttp.DialTimeout(addr, timeout)
		},
		Transport: roundTripper{},
	}
	return c, nil
}

// Name is the backend name used in errors.
func (c *Client) Name() string { return c.name }

// BaseURL is the server's base URL as used in errors (no credentials, no trailing slash).
func (c *Client) BaseURL() string { return c.prefix }

// MaxConcurrency is the limit on requests in flight.
func (c *Client) MaxConcurrency() int { return c.concurrency }

// Stats returns a snapshot of the traffic counters.
func (c *Client) Stats() Stats {
	return Stats{
		Calls: c.calls.Load(), Requests: c.requests.Load(), Retries: c.retries.Load(),
		Failures: c.failures.Load(), InFlight: c.inFlight.Load(), MaxInFlight: c.maxInFlight.Load(),
	}
}

// Close drops idle connections and makes later calls fail; calls in flight finish normally.
// It is safe to call more than once.
func (c *Client) Close() {
	c.closed.Store(true)
	c.hc.CloseIdleConnections()
}

// Call is one HTTP request to the server.
type Call struct {
	Method   string            // "GET" or "POST"
	Endpoint string            // appended to the base URL, e.g. "/generate"
	Body     any               // JSON-encoded when non-nil; a []byte is sent as is
	Headers  map[string]string // per-call headers, e.g. a routing key
}

// Do sends call, retrying transient failures, and hands a 2xx response body to decode. The
// body is valid only during decode. An error from decode ends the call without a retry; an
// error that carries a status code is returned as is, any other is wrapped as status.Backend.
// Every error Do returns carries a status code: Cancelled or Timeout when ctx ended,
// InvalidArgument for HTTP 400/401/403/413/422 (ErrContextLength matches a context-length
// 400), NotFound for 404, Backend for everything else.
func (c *Client) Do(ctx context.Context, call Call, decode func(body []byte) error) (err error) {
	c.calls.Add(1)
	defer func() {
		if err != nil {
			c.failures.Add(1)
		}
	}()
	if c.closed.Load() {
		return status.Errorf(status.InvalidArgument, "%s: client for %s is closed", c.name, c.prefix)
	}
	if call.Method == "" {
		call.Method = fasthttp.MethodGet
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var body []byte
	switch b := call.Body.(type) {
	case nil:
	case []byte:
		body = b
	default:
		// Encoded into a pooled buffer: request bodies carry whole prefixes (kilobytes), and
		// every attempt below is over when Do returns.
		stream := JSON.BorrowStream(nil)
		defer JSON.ReturnStream(stream)
		stream.WriteVal(b)
		if stream.Error != nil {
			return status.Wrap(status.InvalidArgument, stream.Error, "%s: %s %s: cannot encode the request",
				c.name, call.Method, c.prefix+call.Endpoint)
		}
		body = stream.Buffer()
	}
	for retry := 0; ; retry++ {
		rerr, retryable, retryAfter := c.attempt(ctx, call, body, decode)
		if rerr == nil {
			return nil
		}
		var re *RequestError
		if errors.As(rerr, &re) {
			re.Retries = retry
		}
		if !retryable || retry >= c.retry.MaxRetries {
			return rerr
		}
		wait := c.retry.backoff(retry)
		if retryAfter > 0 {
			if retryAfter > c.retry.MaxRetryAfter {
				if re != nil {
					re.Message += " (Retry-After " + retryAfter.String() + " exceeds the limit " + c.retry.MaxRetryAfter.String() + ")"
				}
				return rerr
			}
			wait = retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			if re != nil {
				re.Message += " (no time left before the deadline for a retry in " + wait.String() + ")"
			}
			return rerr
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.contextError(ctx, call, "while waiting to retry after: "+rerr.Error())
		case <-t.C:
		}
		c.retries.Add(1)
	}
}

// attempt sends one request. It reports whether a failure is worth retrying and how long the
// server asked to wait.
func (c *Client) attempt(ctx context.Context, call Call, body []byte, decode func([]byte) error) (error, bool, time.Duration) {
	select {
	case c.slots <- struct{}{}:
	default:
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return c.contextError(ctx, call, "while waiting for a free request slot (limit "+strconv.Itoa(c.concurrency)+")"), false, 0
		}
	}
	defer func() {
		<-c.slots
		if c.closed.Load() {
			// Close ran while this call was on the wire: its connection went back to the
			// pool after Close emptied it, so drop it now rather than at the idle timeout.
			c.hc.CloseIdleConnections()
		}
	}()
	if ctx.Err() != nil {
		return c.contextError(ctx, call, "before sending"), false, 0
	}
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}

	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.prefix + call.Endpoint)
	req.Header.SetMethod(call.Method)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if c.auth != nil {
		req.Header.Set("Authorization", c.auth.header)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	for k, v := range call.Headers {
		req.Header.Set(k, v)
	}
	st := &attemptState{ctx: ctx}
	if dl, ok := ctx.Deadline(); ok {
		st.deadline = dl
		req.SetTimeout(time.Until(dl))
	}
	req.SetUserValue(stateKey{}, st)
	c.requests.Add(1)
	if err := c.hc.Do(req, resp); err != nil {
		return c.networkError(ctx, call, err)
	}
	code := resp.StatusCode()
	if code < 200 || code > 299 {
		return c.statusError(call, code, resp)
	}
	if err := decode(resp.Body()); err != nil {
		if status.CodeOf(err) == status.Internal {
			var se *status.Error
			if !errors.As(err, &se) {
				err = status.Wrap(status.Backend, err, "%s: %s %s: bad response body", c.name, call.Method, c.prefix+call.Endpoint)
			}
		}
		return err, false, 0
	}
	return nil, false, 0
}

func (c *Client) contextError(ctx context.Context, call Call, when string) error {
	code, what := status.Cancelled, "cancelled"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code, what = status.Timeout, "deadline passed"
	}
	return status.Wrap(code, ctx.Err(), "%s: %s %s: %s %s", c.name, call.Method, c.prefix+call.Endpoint, what, when)
}

func (c *Client) networkError(ctx context.Context, call Call, err error) (error, bool, time.Duration) {
	var ce *connError
	if !errors.As(err, &ce) {
		// Errors raised by fasthttp before our round trip ran (e.g. no free connection).
		ce = &connError{stage: "connect", err: err}
	}
	if ce.cancelled || ctx.Err() != nil {
		return c.contextError(ctx, call, "during "+ce.stage), false, 0
	}
	if isTimeout(ce.err) || errors.Is(ce.err, fasthttp.ErrDialTimeout) {
		if ce.stage == "connect" {
			// A connect timeout is the server being unreachable, not the caller's deadline.
			return wrapRequestError(&RequestError{Backend: c.name, Method: call.Method, URL: c.prefix + call.Endpoint,
				Message: "cannot connect: " + ce.err.Error(), Err: ce.err}), true, 0
		}
		return status.Wrap(status.Timeout, ce.err, "%s: %s %s: no response before the deadline (%s)",
			c.name, call.Method, c.prefix+call.Endpoint, ce.stage), false, 0
	}
	msg := ce.err.Error()
	switch ce.stage {
	case "connect":
		msg = "cannot connect: " + msg
	case "read":
		msg = "response broke off: " + msg
	default:
		msg = "no response: " + msg
	}
	// A failure before the first response byte means the server did not process the
	// request as far as we can tell; one after it means a broken response, not retried.
	return wrapRequestError(&RequestError{Backend: c.name, Method: call.Method, URL: c.prefix + call.Endpoint,
		Message: msg, Err: ce.err}), ce.stage != "read", 0
}

func (c *Client) statusError(call Call, code int, resp *fasthttp.Response) (error, bool, time.Duration) {
	body := resp.Body()
	if c.auth != nil && c.auth.key != "" {
		// Some servers echo a rejected key in their error message; errors end up in
		// logs and in failed tree nodes, which must never show it.
		body = bytes.ReplaceAll(body, []byte(c.auth.key), []byte("<redacted>"))
	}
	re := &RequestError{
		Backend: c.name, Method: call.Method, URL: c.prefix + call.Endpoint,
		Status: code, Message: errorMessage(body),
	}
	retryable := false
	switch code {
	case fasthttp.StatusTooManyRequests, fasthttp.StatusRequestTimeout, fasthttp.StatusInternalServerError,
		fasthttp.StatusBadGateway, fasthttp.StatusServiceUnavailable, fasthttp.StatusGatewayTimeout:
		retryable = true
		re.RetryAfter = parseRetryAfter(string(resp.Header.Peek("Retry-After")), time.Now())
	}
	if code == fasthttp.StatusBadRequest || code == fasthttp.StatusRequestEntityTooLarge || code == fasthttp.StatusUnprocessableEntity {
		re.contextLength = isContextLengthMessage(re.Message)
	}
	return wrapRequestError(re), retryable, re.RetryAfter
}

// redactURL drops user credentials from a URL string for use in an error message.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.LastIndex(s, "@"); i >= 0 {
			return "<redacted>@" + s[i+1:]
		}
		return s
	}
	u.User = nil
	return u.String()
}
