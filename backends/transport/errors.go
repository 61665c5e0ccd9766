package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/focus-go/focus-go/core/status"
)

// ErrContextLength matches (errors.Is) an error for a request whose prompt plus max tokens
// does not fit the model's context window. Such errors carry status.InvalidArgument and are
// never retried: the same request would fail again.
var ErrContextLength = errors.New("context length exceeded")

// RequestError describes a request that failed at the server or on the way to it. Do returns
// it wrapped in a *status.Error carrying its code; reach it with errors.As.
type RequestError struct {
	Backend    string        // the Config.Name, e.g. "sglang"
	Method     string        // "GET" or "POST"
	URL        string        // base URL + endpoint, without credentials
	Status     int           // the HTTP status, 0 when no response arrived
	Message    string        // the server's error message, a body snippet, or the network error
	Retries    int           // retries made before giving up
	RetryAfter time.Duration // the server's Retry-After, if any
	Err        error         // the network error, if any

	contextLength bool
}

// ContextLength reports whether the server rejected the request because prompt + max tokens
// exceed the model's context window.
func (e *RequestError) ContextLength() bool { return e.contextLength }

// Code is the status code this failure maps to.
func (e *RequestError) Code() status.Code {
	switch e.Status {
	case 0:
		return status.Backend
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return status.InvalidArgument
	case http.StatusNotFound:
		return status.NotFound
	}
	return status.Backend
}

// Unavailable reports whether the server could not be reached or answered 5xx (after the
// retries): another replica of the same model may still serve the request (core/fleet).
func (e *RequestError) Unavailable() bool { return e.Status == 0 || e.Status >= 500 }

func (e *RequestError) Error() string {
	var b strings.Builder
	b.WriteString(e.Backend)
	b.WriteString(": ")
	b.WriteString(e.Method)
	b.WriteByte(' ')
	b.WriteString(e.URL)
	b.WriteString(": ")
	if e.Status != 0 {
		b.WriteString("HTTP ")
		b.WriteString(strconv.Itoa(e.Status))
		if t := http.StatusText(e.Status); t != "" {
			b.WriteByte(' ')
			b.WriteString(t)
		}
		b.WriteString(": ")
		if e.contextLength {
			b.WriteString("context length exceeded: ")
		}
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
			b.WriteString("check the API key: ")
		}
	}
	b.WriteString(e.Message)
	if e.Retries > 0 {
		b.WriteString(" (after ")
		b.WriteString(strconv.Itoa(e.Retries))
		if e.Retries == 1 {
			b.WriteString(" retry)")
		} else {
			b.WriteString(" retries)")
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrContextLength) true for a context-length rejection.
func (e *RequestError) Is(target error) bool {
	return target == ErrContextLength && e.contextLength
}

func (e *RequestError) Unwrap() error { return e.Err }

func wrapRequestError(e *RequestError) error {
	return &status.Error{Code: e.Code(), Err: e}
}

// IsContextLength reports whether err is a server's context-length rejection.
func IsContextLength(err error) bool { return errors.Is(err, ErrContextLength) }

// isContextLengthMessage recognises the context-overflow messages of vLLM (all versions:
// "maximum context length is"), SGLang ("longer than the model's context length",
// "exceeds the model's maximum context length") and OpenAI ("context_length_exceeded").
func isContextLengthMessage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context length") || strings.Contains(m, "context_length_exceeded")
}

const snippetBytes = 300

// errorMessage pulls the message out of the error envelopes inference servers use:
// {"error":{"message":...}} (vLLM ≥0.10.1, SGLang /generate, OpenAI), {"message":...}
// (older vLLM, SGLang's OpenAI endpoints), {"error":"..."} and {"detail":...} (FastAPI).
// Anything else gives a snippet of the body.
func errorMessage(body []byte) string {
	if len(body) == 0 {
		return "(empty body)"
	}
	var env struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if JSON.Unmarshal(body, &env) == nil {
		switch e := env.Error.(type) {
		case map[string]any:
			if m, ok := e["message"].(string); ok && m != "" {
				return snippet([]byte(m))
			}
		case string:
			if e != "" {
				return snippet([]byte(e))
			}
		}
		if env.Message != "" {
			return snippet([]byte(env.Message))
		}
		if d, ok := env.Detail.(string); ok && d != "" {
			return snippet([]byte(d))
		}
	}
	return "body: " + strconv.Quote(snippet(body))
}

// snippet returns at most snippetBytes of b as valid UTF-8, marking a cut.
func snippet(b []byte) string {
	cut := false
	if len(b) > snippetBytes {
		b = b[:snippetBytes]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
		cut = true
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if cut {
		s += "…"
	}
	return s
}

// parseRetryAfter reads a Retry-After header: delay seconds (integer, or a decimal as some
// servers send) or an HTTP date. Zero when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if !(secs > 0 && secs <= 1e6) { // also rejects NaN, which ParseFloat accepts
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// stateKey carries an attemptState from Client.attempt to roundTripper through the request's
// user values (fasthttp's RoundTripper has no context parameter).
type stateKey struct{}

type attemptState struct {
	ctx      context.Context
	deadline time.Time
}

// connError is a failure below HTTP, tagged with the stage it happened in: "connect",
// "send", "await" (no response byte yet) or "read" (the response started, then broke off).
type connError struct {
	stage     string
	err       error
	cancelled bool
}

func (e *connError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// roundTripper is fasthttp's default round trip plus what it lacks: the context closes the
// connection when it ends (so the server aborts the generation and the call returns at
// once), deadlines come from the context, and failures say whether any response byte had
// arrived, which decides whether a retry is safe.
type roundTripper struct{}

func (roundTripper) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	st, _ := req.UserValue(stateKey{}).(*attemptState)
	if st == nil {
		st = &attemptState{ctx: context.Background()}
	}
	// A pooled keep-alive connection the server has meanwhile closed fails before any
	// response byte; that is not a server failure, so try another connection at once
	// (bounded: each pass takes one pooled connection or dials a new one).
	for pass := 0; ; pass++ {
		reused, err := roundTripOnce(hc, req, resp, st)
		if err == nil {
			return false, nil
		}
		if !reused || err.cancelled || pass >= 3 || (err.stage != "send" && err.stage != "await") || isTimeout(err.err) {
			return false, err
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, fasthttp.ErrTimeout) || (errors.As(err, &ne) && ne.Timeout())
}

func roundTripOnce(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, st *attemptState) (bool, *connError) {
	var timeout time.Duration
	if !st.deadline.IsZero() {
		if timeout = time.Until(st.deadline); timeout <= 0 {
			return false, &connError{stage: "connect", err: fasthttp.ErrTimeout}
		}
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	if err != nil {
		return false, &connError{stage: "connect", err: err}
	}
	reused := !cc.LastUseTime().IsZero()
	conn := cc.Conn()
	stop := context.AfterFunc(st.ctx, func() { _ = conn.Close() })
	fail := func(stage string, err error) (bool, *connError) {
		hc.CloseConn(cc)
		return reused, &connError{stage: stage, err: err, cancelled: !stop()}
	}
	// Always set both deadlines: a pooled connection may carry an earlier request's.
	if err := conn.SetDeadline(st.deadline); err != nil {
		return fail("send", err)
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		return fail("send", err)
	}
	br := hc.AcquireReader(conn)
	if _, err := br.Peek(1); err != nil {
		hc.ReleaseReader(br)
		return fail("await", err)
	}
	err = resp.ReadLimitBody(br, hc.MaxResponseBodySize)
	hc.ReleaseReader(br)
	if err != nil {
		return fail("read", err)
	}
	if !stop() {
		// The context ended while the response arrived; the connection is already closed.
		hc.CloseConn(cc)
		return reused, &connError{stage: "read", err: st.ctx.Err(), cancelled: true}
	}
	if req.ConnectionClose() || resp.ConnectionClose() {
		hc.CloseConn(cc)
	} else {
		hc.ReleaseConn(cc)
	}
	return reused, nil
}
