package sglang

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// Name prefixes this package's errors.
const Name = "sglang"

// Config describes one SGLang server or router.
type Config struct {
	// BaseURL is the server or router, e.g. "http://localhost:30000".
	BaseURL string
	// APIKey, when set, is sent as a bearer token (SGLang's --api-key).
	APIKey string
	// Headers are sent with every request.
	Headers map[string]string
	// Timeout bounds one Generate call, retries included (0 = only the context bounds it).
	// Allow for queueing: minutes are normal for long rollouts on a busy server.
	Timeout        time.Duration
	ConnectTimeout time.Duration
	// MaxConcurrency caps the requests in flight (default transport.DefaultMaxConcurrency).
	MaxConcurrency int
	Retry          transport.RetryPolicy
}

// Client generates token continuations through one SGLang server or router.
type Client struct {
	http *transport.Client
}

// New builds a Client. It does not contact the server; call StartupCheck for that.
func New(cfg Config) (*Client, error) {
	hc, err := transport.New(transport.Config{
		Name: Name, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Headers: cfg.Headers,
		MaxConcurrency: cfg.MaxConcurrency, Timeout: cfg.Timeout, ConnectTimeout: cfg.ConnectTimeout,
		Retry: cfg.Retry,
	})
	if err != nil {
		return nil, err
	}
	return &Client{http: hc}, nil
}

// Transport exposes the HTTP client, for its Stats and BaseURL.
func (c *Client) Transport() *transport.Client { return c.http }

// Close releases idle connections; later calls fail.
func (c *Client) Close() { c.http.Close() }

// request is the /generate body, in Slime's shape.
type request struct {
	RID                  string   `json:"rid"`
	InputIDs             []uint32 `json:"input_ids"`
	ReturnLogprob        bool     `json:"return_logprob"`
	LogprobStartLen      int      `json:"logprob_start_len"`
	TopLogprobsNum       int      `json:"top_logprobs_num"`
	ReturnTextInLogprobs bool     `json:"return_text_in_logprobs"`
	Stream               bool     `json:"stream"`
	SamplingParams       sampling `json:"sampling_params"`
}

type sampling struct {
	MaxNewTokens               int      `json:"max_new_tokens"`
	Temperature                float64  `json:"temperature"`
	TopP                       float64  `json:"top_p"`
	TopK                       int      `json:"top_k"`
	MinP                       float64  `json:"min_p"`
	Stop                       []string `json:"stop"`
	StopTokenIDs               []uint32 `json:"stop_token_ids"`
	SkipSpecialTokens          bool     `json:"skip_special_tokens"`
	NoStopTrim                 bool     `json:"no_stop_trim"`
	SpacesBetweenSpecialTokens bool     `json:"spaces_between_special_tokens"`
	RepetitionPenalty          float64  `json:"repetition_penalty"`
	N                          int      `json:"n"`
	// SamplingSeed exists only in 2025+ builds (older ones reject unknown keys), so it is
	// sent only when a seed is set.
	SamplingSeed *int64 `json:"sampling_seed,omitempty"`
}

// NewRequestID makes a request id for the server's rid (so the request can be aborted).
func NewRequestID() string {
	return "focus-" + strconv.FormatUint(rand.Uint64(), 16)
}

// Generate continues req.Tokens with the sampling parameters (defaults applied, every field
// sent), validates the response and returns it. See the package comment for aborts and
// errors.
func (c *Client) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	p, err := req.Params.Resolve()
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "%s", Name)
	}
	if len(req.Tokens) == 0 {
		return nil, status.Errorf(status.InvalidArgument, "%s: prompt has no tokens; /generate needs at least one input id", Name)
	}
	body := newRequest(req, p)
	var headers map[string]string
	if req.RoutingKey != "" {
		headers = map[string]string{"X-SMG-Routing-Key": req.RoutingKey}
	}
	var res *generate.Result
	err = c.http.Do(ctx, transport.Call{Method: "POST", Endpoint: "/generate", Body: body, Headers: headers},
		func(b []byte) error {
			var derr error
			res, derr = parseResponse(b, req.Tokens, p, req.SkipText)
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

// Abort asks the server to end the request with this rid; it then finishes with an "abort"
// Result holding the tokens generated so far. Behind a router, call it on every worker.
func (c *Client) Abort(ctx context.Context, rid string) error {
	if rid == "" {
		return status.Errorf(status.InvalidArgument, "%s: abort needs a request id", Name)
	}
	return c.http.Do(ctx, transport.Call{Method: "POST", Endpoint: "/abort_request",
		Body: map[string]string{"rid": rid}}, func([]byte) error { return nil })
}

// ServerInfo is what StartupCheck learned about the server.
type ServerInfo struct {
	ModelPath     string // get_model_info.model_path
	TokenizerPath string
	IsGeneration  bool
	WeightVersion string
	Version       string // server_info.version; empty when the server does not say
	ContextLength int    // server_info.context_length; 0 when the server does not say
	// MaxRunningRequests is the requests the server batches at once (server_info's
	// max_running_requests, or its internal_states' one); 0 when it does not say, as a
	// router does. A fleet keeps this many requests in flight to this server.
	MaxRunningRequests int
}

// StartupCheck checks that the server is up (GET /health) and is an SGLang generation
// server (GET /get_model_info, or /model_info on the newest builds), and reads its version
// and context length from /get_server_info (or /server_info) when it offers them.
func (c *Client) StartupCheck(ctx context.Context) (ServerInfo, error) {
	var info ServerInfo
	if err := c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/health"}, func([]byte) error { return nil }); err != nil {
		return info, err
	}
	var model struct {
		ModelPath     *string `json:"model_path"`
		TokenizerPath string  `json:"tokenizer_path"`
		IsGeneration  *bool   `json:"is_generation"`
		WeightVersion string  `json:"weight_version"`
	}
	decodeModel := func(b []byte) error {
		if err := transport.JSON.Unmarshal(b, &model); err != nil {
			return status.Wrap(status.Backend, err, "%s: %s: model info is not the expected JSON object", Name, c.http.BaseURL())
		}
		return nil
	}
	err := c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/get_model_info"}, decodeModel)
	if status.CodeOf(err) == status.NotFound {
		err = c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/model_info"}, decodeModel)
	}
	if err != nil {
		return info, err
	}
	if model.ModelPath == nil || model.IsGeneration == nil {
		return info, status.Errorf(status.Backend,
			"%s: %s does not look like an SGLang server: its model info has no model_path / is_generation", Name, c.http.BaseURL())
	}
	info.ModelPath, info.TokenizerPath = *model.ModelPath, model.TokenizerPath
	info.IsGeneration, info.WeightVersion = *model.IsGeneration, model.WeightVersion
	if !info.IsGeneration {
		return info, status.Errorf(status.InvalidArgument,
			"%s: model %s at %s is not a generation model (is_generation false)", Name, info.ModelPath, c.http.BaseURL())
	}
	var server struct {
		Version            any `json:"version"`
		ContextLength      any `json:"context_length"`
		MaxRunningRequests any `json:"max_running_requests"`
		InternalStates     []struct {
			MaxRunningRequests any `json:"max_running_requests"`
		} `json:"internal_states"`
	}
	decodeServer := func(b []byte) error {
		// Routers answer with their own shape; what is not there stays unknown.
		_ = transport.JSON.Unmarshal(b, &server)
		return nil
	}
	err = c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/get_server_info"}, decodeServer)
	if status.CodeOf(err) == status.NotFound {
		err = c.http.Do(ctx, transport.Call{Method: "GET", Endpoint: "/server_info"}, decodeServer)
	}
	if err != nil && status.CodeOf(err) != status.NotFound {
		return info, err
	}
	if v, ok := server.Version.(string); ok {
		info.Version = v
	}
	if n, ok := server.ContextLength.(float64); ok && n > 0 {
		info.ContextLength = int(n)
	}
	if n, ok := server.MaxRunningRequests.(float64); ok && n > 0 {
		info.MaxRunningRequests = int(n)
	} else if len(server.InternalStates) > 0 {
		if n, ok := server.InternalStates[0].MaxRunningRequests.(float64); ok && n > 0 {
			info.MaxRunningRequests = int(n)
		}
	}
	return info, nil
}
