package openai

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// Name prefixes this package's errors.
const Name = "openai"

// DefaultBaseURL is the OpenAI API, used when neither Config.BaseURL nor OPENAI_BASE_URL is set.
const DefaultBaseURL = "https://api.openai.com/v1"

// The environment variables WithEnv reads, as the official SDK does.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// API selects the endpoint a Client talks to.
type API string

const (
	Chat      API = "chat"      // POST {base}/chat/completions
	Responses API = "responses" // POST {base}/responses
)

// Config describes one OpenAI (or OpenAI-compatible) endpoint and the policy-level settings
// every request of a Client shares.
type Config struct {
	API API
	// Model is the served model name sent as "model".
	Model string
	// BaseURL includes the version prefix, as in the official SDK ("http://host:8000/v1").
	// Empty: DefaultBaseURL.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey  string
	Headers map[string]string
	// SystemPrompt, when set, is prepended as a system message (Chat) or sent as
	// "instructions" (Responses), unless the conversation opens with its own system or
	// developer message, which then wins.
	SystemPrompt string
	// ReasoningEffort ("none", "minimal", "low", "medium", "high"), when set, is sent as
	// "reasoning_effort" (Chat) or "reasoning": {"effort": ...} (Responses).
	ReasoningEffort string
	Timeout         time.Duration
	ConnectTimeout  time.Duration
	MaxConcurrency  int
	Retry           transport.RetryPolicy
}

// WithEnv returns c with an empty APIKey and BaseURL taken from OPENAI_API_KEY and
// OPENAI_BASE_URL as lookup reports them (os.LookupEnv, or a snapshot of the caller's
// environment). Explicit values win.
func (c Config) WithEnv(lookup func(string) (string, bool)) Config {
	if c.APIKey == "" {
		if v, ok := lookup(EnvAPIKey); ok {
			c.APIKey = strings.TrimSpace(v)
		}
	}
	if c.BaseURL == "" {
		if v, ok := lookup(EnvBaseURL); ok {
			c.BaseURL = strings.TrimSpace(v)
		}
	}
	return c
}

// Client sends conversations to one endpoint. Create it with New.
type Client struct {
	cfg  Config
	http *transport.Client
}

// New validates cfg and builds a Client; it does not contact the server.
func New(cfg Config) (*Client, error) {
	switch cfg.API {
	case Chat, Responses:
	default:
		return nil, status.Errorf(status.InvalidArgument, "%s: api %q: expected %q or %q", Name, cfg.API, Chat, Responses)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, status.Errorf(status.InvalidArgument, "%s: model is empty; name the served model", Name)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if u, err := url.Parse(cfg.BaseURL); err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") && cfg.APIKey == "" {
		return nil, status.Errorf(status.InvalidArgument,
			"%s: no API key for %s: pass api_key or set %s", Name, DefaultBaseURL, EnvAPIKey)
	}
	hc, err := transport.New(transport.Config{
		Name: Name, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Headers: cfg.Headers,
		MaxConcurrency: cfg.MaxConcurrency, Timeout: cfg.Timeout, ConnectTimeout: cfg.ConnectTimeout,
		Retry: cfg.Retry,
	})
	if err != nil {
		return nil, err
	}
	cfg.APIKey = "" // the transport holds it, redacted; keep no second copy
	return &Client{cfg: cfg, http: hc}, nil
}

// Transport exposes the HTTP client, for its Stats and BaseURL.
func (c *Client) Transport() *transport.Client { return c.http }

// API is the endpoint this client talks to.
func (c *Client) API() API { return c.cfg.API }

// Close releases idle connections; later calls fail.
func (c *Client) Close() { c.http.Close() }

// Request is one generation request: a conversation, its tool schemas and sampling.
type Request struct {
	Messages []Message
	// Tools are function tool schemas, in either API's shape: Chat's nested
	// {"type":"function","function":{name,...}} or Responses' flat {"type":"function",name,...};
	// each is converted to the shape the endpoint wants.
	Tools []map[string]any
	// ToolChoice is sent as is when set ("auto", "none", "required" or a named function).
	ToolChoice any
	Params     generate.SamplingParams
}

// Generate sends req to the client's endpoint and returns the parsed reply.
func (c *Client) Generate(ctx context.Context, req Request) (*Result, error) {
	if err := Validate(req.Messages); err != nil {
		return nil, err
	}
	if err := requireAnswered(req.Messages); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, status.Errorf(status.InvalidArgument, "%s: the conversation has no messages", Name)
	}
	var (
		body     any
		endpoint string
		decode   func([]byte) (*Result, error)
		err      error
	)
	switch c.cfg.API {
	case Chat:
		body, err = c.chatBody(req)
		endpoint, decode = "/chat/completions", parseChat
	default:
		body, err = c.responsesBody(req)
		endpoint, decode = "/responses", parseResponses
	}
	if err != nil {
		return nil, err
	}
	var res *Result
	err = c.http.Do(ctx, transport.Call{Method: "POST", Endpoint: endpoint, Body: body}, func(b []byte) error {
		var derr error
		res, derr = decode(b)
		return derr
	})
	if err != nil {
		return nil, authHint(err)
	}
	return res, nil
}

// authHint makes a rejected key read as what it is; the transport already keeps the key
// itself out of the message.
func authHint(err error) error {
	var re *transport.RequestError
	if errors.As(err, &re) && (re.Status == 401 || re.Status == 403) {
		return status.Wrap(status.InvalidArgument, err,
			"%s: authentication failed (HTTP %d): pass a valid api_key or set %s", Name, re.Status, EnvAPIKey)
	}
	return err
}
