package vllm

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// Name prefixes this package's errors.
const Name = "vllm"

// Config describes one vLLM server.
type Config struct {
	// BaseURL is the server, with or without the OpenAI "/v1" suffix:
	// "http://localhost:8000/v1" and "http://localhost:8000" are the same server.
	BaseURL string
	// Model is the model's name (e.g. "Qwen/Qwen3-8B"). The request's "model" is
	// ServedModel when set, else what StartupCheck found for Model, else Model.
	Model       string
	ServedModel string
	// APIKey is sent as a bearer token (vLLM's --api-key; "EMPTY" works for open servers).
	APIKey  string
	Headers map[string]string
	// Timeout bounds one Generate call, retries included (0 = only the context bounds it).
	Timeout        time.Duration
	ConnectTimeout time.Duration
	// MaxConcurrency caps the requests in flight (default transport.DefaultMaxConcurrency).
	MaxConcurrency int
	Retry          transport.RetryPolicy
}

// Client generates token continuations through one vLLM server.
type Client struct {
	http  *transport.Client
	model string
	fixed bool // ServedModel was given: StartupCheck must find it, not choose

	mu     sync.RWMutex
	served string
}

// New builds a Client. It does not contact the server; call StartupCheck for that.
func New(cfg Config) (*Client, error) {
	if cfg.Model == "" && cfg.ServedModel == "" {
		return nil, status.Errorf(status.InvalidArgument, "%s: a model or served model name is required", Name)
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	base = strings.TrimSuffix(base, "/v1")
	hc, err := transport.New(transport.Config{
		Name: Name, BaseURL: base, APIKey: cfg.APIKey, Headers: cfg.Headers,
		MaxConcurrency: cfg.MaxConcurrency, Timeout: cfg.Timeout, ConnectTimeout: cfg.ConnectTimeout,
		Retry: cfg.Retry,
	})
	if err != nil {
		return nil, err
	}
	served := cfg.ServedModel
	if served == "" {
		served = cfg.Model
	}
	return &Client{http: hc, model: cfg.Model, fixed: cfg.ServedModel != "", served: served}, nil
}

// ServedModel is the name sent as the request's "model".
func (c *Client) ServedModel() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.served
}

// Transport exposes the HTTP client, for its Stats and BaseURL.
func (c *Client) Transport() *transport.Client { return c.http }

// Close releases idle connections; later calls fail.
func (c *Client) Close() { c.http.Close() }

// request is the /v1/completions body.
type request struct {
	Model                  string   `json:"model"`
	Prompt                 []uint32 `json:"prompt"`
	MaxTokens              int      `json:"max_tokens"`
	Temperature            float64  `json:"temperature"`
	TopP                   float64  `json:"top_p"`
	TopK                   int      `json:"top_k"`
	MinP                   float64  `json:"min_p"`
	Seed                   *int64   `json:"seed"` // null = no per-request generator
	N                      int      `json:"n"`
	Stop                   []string `json:"stop"`
	StopTokenIDs           []uint32 `json:"stop_token_ids"`
	Logprobs               int      `json:"logprobs"`
	PromptLogprobs         *int     `json:"prompt_logprobs"`
	RepetitionPenalty      float64  `json:"repetition_penalty"`
	SkipSpecialTokens      bool     `json:"skip_special_tokens"`
	IncludeStopStrInOutput bool     `json:"include_stop_str_in_output"`
	ReturnTokensAsTokenIDs bool     `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs         bool     `json:"return_token_ids"`
}

// Generate continues req.Tokens with the sampling parameters (defaults applied, every field
// sent), validates the response and returns it. req.ID, when set, goes out as X-Request-Id;
// req.RoutingKey as X-SMG-Routing-Key (for a gateway in front of vLLM). See the package
// comment for aborts and errors.
func (c *Client) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	p, err := req.Params.Resolve()
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "%s", Name)
	}
	if len(req.Tokens) == 0 {
		return nil, status.Errorf(status.InvalidArgument, "%s: prompt has no tokens; a completion needs at least one prompt token", Name)
	}
	body := &request{
		Model: c.ServedModel(), Prompt: req.Tokens, MaxTokens: p.MaxTokens,
		Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, N: 1,
		Stop: p.Stop, StopTokenIDs: p.StopTokenIDs, Logprobs: p.TopLogprobs,
		RepetitionPenalty: p.RepetitionPenalty, IncludeStopStrInOutput: true,
		ReturnTokensAsTokenIDs: true, ReturnTokenIDs: true,
	}
	if p.HasSeed {
		seed := p.Seed
		body.Seed = &seed
	}
	if p.PromptLogprobs >= 0 {
		n := p.PromptLogprobs
		body.PromptLogprobs = &n
	}
	var headers map[string]string
	if req.ID != "" || req.RoutingKey != "" {
		headers = make(map[string]string, 2)
		if req.ID != "" {
			headers["X-Request-Id"] = req.ID
		}
		if req.RoutingKey != "" {
			headers["X-SMG-Routing-Key"] = req.RoutingKey
		}
	}
	var res *generate.Result
	err = c.http.Do(ctx, transport.Call{Method: "POST", Endpoint: "/v1/completions", Body: body, Headers: headers},
		func(b []byte) error {
			var derr error
			res, derr = parseResponse(b, req.Tokens, p)
			return derr
		})
	if err != nil {
		return nil, err
	}
	if err := res.Validate(Name, p.MaxTokens); err != nil {
		return nil, err
	}
	return res, nil
}

// ServerInfo is what StartupCheck learned about the server.
type ServerInfo struct {
	ServedModel string   // the name requests will use
	Root        string   // the model it serves (e.g. "Qwen/Qwen3-8B")
	MaxModelLen int      // the context window; 0 when not reported
	OwnedBy     string   // "vllm" (SGLang's OpenAI endpoints say "sglang")
	Version     string   // GET /version; empty when the server does not say
	Models      []string // every served model name
}

// StartupCheck checks that the engine is alive (GET /health), reads the version
// (GET /version, optional) and the served models (GET /v1/models), and settles the served
// model name: ServedModel must be listed (else status.NotFound); otherwise the model whose
// id or root is Model is used, or the only model served.
func (c *Client) StartupCheck(ctx context.Context) (ServerInfo, error) {
	var info ServerInfo
	if err := c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/health"}, func([]byte) error { return nil }); err != nil {
		return info, err
	}
	var version struct {
		Version string `json:"version"`
	}
	err := c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/version"}, func(b []byte) error {
		_ = transport.JSON.Unmarshal(b, &version) // optional: an unknown shape leaves it empty
		return nil
	})
	if err != nil && status.CodeOf(err) != status.NotFound {
		return info, err
	}
	info.Version = version.Version
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			Root        string `json:"root"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	err = c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/v1/models"}, func(b []byte) error {
		if err := transport.JSON.Unmarshal(b, &models); err != nil {
			return status.Wrap(status.Backend, err, "%s: %s/v1/models is not an OpenAI model list", Name, c.http.BaseURL())
		}
		return nil
	})
	if err != nil {
		return info, err
	}
	if len(models.Data) == 0 {
		return info, status.Errorf(status.Backend, "%s: %s/v1/models lists no models", Name, c.http.BaseURL())
	}
	for _, m := range models.Data {
		info.Models = append(info.Models, m.ID)
	}
	want := c.ServedModel()
	pick := -1
	for i, m := range models.Data {
		if m.ID == want {
			pick = i
			break
		}
	}
	if pick < 0 && !c.fixed {
		for i, m := range models.Data {
			if c.model != "" && m.Root == c.model {
				pick = i
				break
			}
		}
		if pick < 0 && len(models.Data) == 1 {
			pick = 0
		}
	}
	if pick < 0 {
		return info, status.Errorf(status.NotFound, "%s: model %q is not served at %s; it serves %s",
			Name, want, c.http.BaseURL(), strings.Join(info.Models, ", "))
	}
	m := models.Data[pick]
	info.ServedModel, info.Root, info.MaxModelLen, info.OwnedBy = m.ID, m.Root, m.MaxModelLen, m.OwnedBy
	c.mu.Lock()
	c.served = m.ID
	c.mu.Unlock()
	return info, nil
}
