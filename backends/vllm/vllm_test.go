package vllm

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// The request and response of inference-apis.md §1.2/§1.3, byte for byte (the response's
// prompt_token_ids is the reference's shortened list).
const (
	referenceRequest = `{"model":"qwen3-8b","prompt":[151644,872,198,3838,374,220,17,10,17,30,151645,198,151644,77091,198],
 "max_tokens":256,"temperature":1.0,"top_p":1.0,"top_k":-1,"seed":7,"stop":["</answer>"],
 "logprobs":0,"prompt_logprobs":null,"repetition_penalty":1.0,"skip_special_tokens":false,
 "include_stop_str_in_output":true,"return_tokens_as_token_ids":true,"return_token_ids":true}`
	referenceResponse = `{"id":"cmpl-8f2c","object":"text_completion","created":1760000001,"model":"qwen3-8b",
 "choices":[{"index":0,"text":"2+2=4.</answer>",
   "logprobs":{"tokens":["token_id:17","token_id:10","token_id:17","token_id:28","token_id:19","token_id:13","token_id:522"],
               "token_logprobs":[-0.01,-0.2,-0.003,-0.05,-0.0001,-1.3,-0.4],
               "top_logprobs":[{"token_id:17":-0.01},{"token_id:10":-0.2},{"token_id:17":-0.003},{"token_id:28":-0.05},
                               {"token_id:19":-0.0001},{"token_id:13":-1.3},{"token_id:522":-0.4}],
               "text_offset":[0,11,22,33,44,55,66]},
   "finish_reason":"stop","stop_reason":"</answer>",
   "token_ids":[17,10,17,28,19,13,522],"prompt_token_ids":[151644,872,198],"prompt_logprobs":null}],
 "usage":{"prompt_tokens":15,"completion_tokens":7,"total_tokens":22,"prompt_tokens_details":null}}`
	modelsList = `{"object":"list","data":[{"id":"qwen3-8b","object":"model","created":1760000000,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":32768,"permission":[{}]}]}`
)

var referencePrompt = []uint32{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198}

func referenceParams() generate.SamplingParams {
	return generate.SamplingParams{
		Temperature: generate.Float64(1.0), MaxTokens: generate.Int(256), TopP: generate.Float64(1.0),
		Seed: generate.Int64(7), Stop: []string{"</answer>"}, Logprobs: generate.Int(0),
	}
}

type fake struct {
	mu       sync.Mutex
	bodies   []string
	headers  []http.Header
	paths    []string
	requests int
	respond  func(w http.ResponseWriter, r *http.Request, n int)
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.headers = append(f.headers, r.Header.Clone())
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	n := f.requests
	f.requests++
	f.mu.Unlock()
	f.respond(w, r, n)
}

func send(code int, body string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func start(t *testing.T, cfg Config, respond func(http.ResponseWriter, *http.Request, int)) (*fake, *Client) {
	t.Helper()
	f := &fake{respond: respond}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + cfg.BaseURL
	if cfg.Model == "" && cfg.ServedModel == "" {
		cfg.ServedModel = "qwen3-8b"
	}
	cfg.Retry = transport.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return f, c
}

func TestReferenceExchange(t *testing.T) {
	f, c := start(t, Config{BaseURL: "/v1", APIKey: "EMPTY"}, send(200, referenceResponse))
	res, err := c.Generate(context.Background(), generate.Request{Tokens: referencePrompt, Params: referenceParams(), ID: "tree7-node3"})
	require.NoError(t, err)
	assert.Equal(t, "POST /v1/completions", f.paths[0])
	assert.Equal(t, "Bearer EMPTY", f.headers[0].Get("Authorization"))
	assert.Equal(t, "tree7-node3", f.headers[0].Get("X-Request-Id"))
	// The reference request plus the fields it leaves to defaults, now explicit.
	var want map[string]any
	require.NoError(t, transport.JSON.Unmarshal([]byte(referenceRequest), &want))
	want["min_p"], want["n"], want["stop_token_ids"] = 0.0, 1.0, []any{}
	wantJSON, _ := transport.JSON.Marshal(want)
	assert.JSONEq(t, string(wantJSON), f.bodies[0])
	res.Entropy = math.Round(res.Entropy*1e12) / 1e12
	assert.Equal(t, &generate.Result{
		Tokens:          []uint32{17, 10, 17, 28, 19, 13, 522},
		PrefixTokens:    referencePrompt,
		Text:            "2+2=4.</answer>",
		StopReason:      "stop",
		MatchedStop:     generate.StopMatch{Kind: generate.MatchString, String: "</answer>"},
		Logprobs:        []float64{-0.01, -0.2, -0.003, -0.05, -0.0001, -1.3, -0.4},
		Entropy:         math.Round((0.01+0.2+0.003+0.05+0.0001+1.3+0.4)/7*1e12) / 1e12,
		ExactGeneration: true,
		PromptTokens:    15,
	}, res)
}

// completion builds a one-choice completion body for the error cases.
func completion(fields string, usage string) string {
	return `{"id":"cmpl-1","object":"text_completion","model":"qwen3-8b","choices":[{"index":0,"text":"ab",` + fields + `}],"usage":` + usage + `}`
}

const (
	lp3      = `"logprobs":{"tokens":["token_id:1","token_id:2","token_id:3"],"token_logprobs":[-0.5,-0.25,-0.125],"top_logprobs":[{"token_id:1":-0.5},{"token_id:2":-0.25},{"token_id:3":-0.125}],"text_offset":[0,0,0]}`
	ids3     = `"token_ids":[1,2,3],"prompt_token_ids":[5,6]`
	usage3   = `{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":16}}`
	stopNull = `"finish_reason":"stop","stop_reason":null`
)

func TestResponses(t *testing.T) {
	prompt := []uint32{5, 6}
	tests := []struct {
		name    string
		body    string
		params  generate.SamplingParams
		code    status.Code
		err     string
		tokens  []uint32
		stop    string
		matched any
		check   func(t *testing.T, r *generate.Result)
	}{
		{name: "EOS", body: completion(lp3+`,`+stopNull+`,`+ids3, usage3), tokens: []uint32{1, 2, 3}, stop: "stop",
			check: func(t *testing.T, r *generate.Result) { assert.Equal(t, 16, r.CachedTokens) }},
		{name: "stop token id", body: completion(lp3+`,"finish_reason":"stop","stop_reason":151645,`+ids3, usage3),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: int64(151645)},
		{name: "length", body: completion(lp3+`,"finish_reason":"length","stop_reason":null,`+ids3, usage3), tokens: []uint32{1, 2, 3}, stop: "length"},
		{name: "abort keeps the partial output", body: completion(lp3+`,"finish_reason":"abort","stop_reason":null,`+ids3, usage3),
			tokens: []uint32{1, 2, 3}, stop: "abort"},
		{name: "older server: ids from token_id strings only", body: completion(lp3+`,`+stopNull, usage3), tokens: []uint32{1, 2, 3}, stop: "stop"},
		// vLLM writes -inf as its floor -9999.0 (vllm 0.33.0 completion/serving.py:765,
		// max(step_token.logprob, -9999.0)) and NaN as null (pydantic): read back as -Inf and
		// NaN, never kept as numbers to train on.
		{name: "floored logprob is -inf, null is NaN", body: completion(`"logprobs":{"tokens":["token_id:1","token_id:2","token_id:3"],"token_logprobs":[-9999.0,-0.5,null],"top_logprobs":null,"text_offset":null},`+stopNull+`,"token_ids":[1,2,3]`, `null`),
			tokens: []uint32{1, 2, 3}, stop: "stop", check: func(t *testing.T, r *generate.Result) {
				require.Len(t, r.Logprobs, 3)
				assert.True(t, math.IsInf(r.Logprobs[0], -1))
				assert.Equal(t, -0.5, r.Logprobs[1])
				assert.True(t, math.IsNaN(r.Logprobs[2]))
				assert.Equal(t, 0.5, r.Entropy)
				n, first := r.NonFiniteLogprobs()
				assert.Equal(t, []int{2, 0}, []int{n, first})
			}},
		{name: "floored top alternative is -inf", params: generate.SamplingParams{Logprobs: generate.Int(1)},
			body:   completion(`"logprobs":{"tokens":["token_id:1"],"token_logprobs":[-0.5],"top_logprobs":[{"token_id:1":-0.5,"token_id:9":-9999.0}]},`+stopNull+`,"token_ids":[1]`, `null`),
			tokens: []uint32{1}, stop: "stop", check: func(t *testing.T, r *generate.Result) {
				assert.Equal(t, []map[uint32]float64{{1: -0.5, 9: math.Inf(-1)}}, r.TopLogprobs)
			}},
		{name: "a logprob just above the floor is kept", body: completion(`"logprobs":{"tokens":["token_id:1"],"token_logprobs":[-9998.5],"top_logprobs":null,"text_offset":null},`+stopNull+`,"token_ids":[1]`, `null`),
			tokens: []uint32{1}, stop: "stop", check: func(t *testing.T, r *generate.Result) { assert.Equal(t, []float64{-9998.5}, r.Logprobs) }},
		{name: "stop_reason list is not a vLLM form", body: completion(lp3+`,"finish_reason":"stop","stop_reason":[1,2],`+ids3, usage3),
			code: status.Backend, err: "vllm: stop_reason is a list of 2 token ids [1 2]"},
		{name: "top logprobs", params: generate.SamplingParams{Logprobs: generate.Int(1)},
			body:   completion(`"logprobs":{"tokens":["token_id:1","token_id:2"],"token_logprobs":[-0.5,-0.25],"top_logprobs":[{"token_id:1":-0.5,"token_id:9":-1.5},{"token_id:2":-0.25}]},`+stopNull+`,"token_ids":[1,2]`, `null`),
			tokens: []uint32{1, 2}, stop: "stop", check: func(t *testing.T, r *generate.Result) {
				assert.Equal(t, []map[uint32]float64{{1: -0.5, 9: -1.5}, {2: -0.25}}, r.TopLogprobs)
			}},
		{name: "prompt logprobs", params: generate.SamplingParams{PromptLogprobs: generate.Int(1)},
			body:   completion(lp3+`,`+stopNull+`,`+ids3+`,"prompt_logprobs":[null,{"6":{"logprob":-3.1,"rank":5,"decoded_token":"Hi"},"8":{"logprob":-0.1,"rank":1,"decoded_token":"Ho"}}]`, usage3),
			tokens: []uint32{1, 2, 3}, stop: "stop", check: func(t *testing.T, r *generate.Result) {
				require.Len(t, r.PromptLogprobs, 2)
				assert.True(t, math.IsNaN(r.PromptLogprobs[0]))
				assert.Equal(t, -3.1, r.PromptLogprobs[1])
				assert.Equal(t, []map[uint32]float64{nil, {6: -3.1, 8: -0.1}}, r.PromptTopLogprobs)
			}},

		{name: "too many tokens", params: generate.SamplingParams{MaxTokens: generate.Int(2)},
			body: completion(lp3+`,"finish_reason":"length","stop_reason":null,`+ids3, usage3), code: status.Backend,
			err: "vllm: response has 3 tokens, max_tokens was 2"},
		{name: "no exact ids", body: completion(`"logprobs":{"tokens":["a","b","c"],"token_logprobs":[-0.5,-0.25,-0.125]},`+stopNull, usage3),
			code: status.Backend, err: `vllm: logprobs.tokens[0] is "a", not "token_id:N", and the response has no token_ids`},
		{name: "neither ids nor logprobs", body: completion(stopNull, usage3), code: status.Backend,
			err: "vllm: response has neither token_ids nor logprobs.tokens"},
		{name: "ids disagree", body: completion(lp3+`,`+stopNull+`,"token_ids":[1,2,4]`, usage3), code: status.Backend,
			err: "vllm: token_ids[2] is 4 but logprobs.tokens[2] is token_id:3"},
		{name: "logprobs missing", body: completion(`"logprobs":null,`+stopNull+`,`+ids3, usage3), code: status.Backend,
			err: "vllm: response has no logprobs for its 3 tokens"},
		{name: "logprobs misaligned", body: completion(`"logprobs":{"token_logprobs":[-0.5,-0.25]},`+stopNull+`,`+ids3, usage3), code: status.Backend,
			err: "vllm: response has 3 tokens but 2 logprobs; expected one logprob per token"},
		{name: "token strings misaligned", body: completion(`"logprobs":{"tokens":["token_id:1"],"token_logprobs":[-0.5,-0.25,-0.1]},`+stopNull+`,`+ids3, usage3), code: status.Backend,
			err: "vllm: response has 3 token_ids but 1 logprobs.tokens"},
		{name: "usage disagrees", body: completion(lp3+`,`+stopNull+`,`+ids3, `{"prompt_tokens":2,"completion_tokens":4}`), code: status.Backend,
			err: "vllm: usage.completion_tokens is 4 but the response has 3 token ids"},
		{name: "unknown finish reason", body: completion(lp3+`,"finish_reason":"tool_calls",`+ids3, usage3), code: status.Backend,
			err: `vllm: unknown finish reason "tool_calls", expected stop, length or abort`},
		{name: "no finish reason", body: completion(lp3+`,"finish_reason":null,`+ids3, usage3), code: status.Backend,
			err: "vllm: response has no finish_reason"},
		{name: "two choices", body: `{"choices":[{"finish_reason":"stop"},{"finish_reason":"stop"}]}`, code: status.Backend,
			err: "vllm: response has 2 choices"},
		{name: "top logprobs keys are text", params: generate.SamplingParams{Logprobs: generate.Int(1)},
			body: completion(`"logprobs":{"tokens":["token_id:1"],"token_logprobs":[-0.5],"top_logprobs":[{"Hi":-0.5}]},`+stopNull+`,"token_ids":[1]`, `null`),
			code: status.Backend, err: `vllm: top_logprobs key "Hi" is not "token_id:N"`},
		{name: "malformed JSON", body: `{"choices":[{"text":}]}`, code: status.Backend, err: "vllm: malformed or truncated JSON response (23 bytes)"},
		{name: "truncated JSON", body: referenceResponse[:300], code: status.Backend, err: "vllm: malformed or truncated JSON response (300 bytes)"},
		{name: "not an object", body: `[]`, code: status.Backend, err: `vllm: response is not a JSON object: "[]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := start(t, Config{}, send(200, tt.body))
			res, err := c.Generate(context.Background(), generate.Request{Tokens: prompt, Params: tt.params})
			if tt.code != status.OK {
				assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tokens, res.Tokens)
			assert.Equal(t, tt.stop, res.StopReason)
			assert.Equal(t, tt.matched, res.MatchedStop.Value())
			assert.True(t, res.ExactGeneration)
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

func TestServerErrors(t *testing.T) {
	tests := []struct {
		name     string
		respond  func(http.ResponseWriter, *http.Request, int)
		code     status.Code
		err      string
		ctxLen   bool
		requests int
	}{
		{name: "context length, older flat envelope", ctxLen: true, requests: 1, code: status.InvalidArgument,
			respond: send(400, `{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2723 tokens (1699 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`),
			err:     "vllm: POST http://127.0.0.1:"},
		{name: "context length, 0.10 nested envelope", ctxLen: true, requests: 1, code: status.InvalidArgument,
			respond: send(400, `{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).","type":"BadRequestError","param":null,"code":400}}`),
			err:     "/v1/completions: HTTP 400 Bad Request: context length exceeded: 'max_tokens' or 'max_completion_tokens' is too large: 8000."},
		{name: "unknown model", requests: 1, code: status.NotFound,
			respond: send(404, `{"error":{"message":"The model `+"`qwen3-8b`"+` does not exist.","type":"NotFoundError","param":"model","code":404}}`),
			err:     "HTTP 404 Not Found: The model `qwen3-8b` does not exist."},
		{name: "500 then success", requests: 2, respond: func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 0 {
				send(500, `{"error":{"message":"EngineCore encountered an issue","type":"InternalServerError","param":null,"code":500}}`)(w, r, n)
				return
			}
			send(200, referenceResponse)(w, r, n)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := start(t, Config{}, tt.respond)
			_, err := c.Generate(context.Background(), generate.Request{Tokens: referencePrompt, Params: referenceParams()})
			assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
			assert.Equal(t, tt.requests, f.requests)
			assert.Equal(t, tt.ctxLen, transport.IsContextLength(err))
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
			}
		})
	}
}

func TestStartupCheck(t *testing.T) {
	twoModels := `{"object":"list","data":[{"id":"base","root":"Qwen/Qwen3-8B","owned_by":"vllm","max_model_len":32768},{"id":"lora-a","root":"Qwen/Qwen3-8B","owned_by":"vllm","max_model_len":32768}]}`
	tests := []struct {
		name   string
		cfg    Config
		routes map[string]func(http.ResponseWriter, *http.Request, int)
		want   ServerInfo
		code   status.Code
		err    string
	}{
		{name: "served name from the HF name", cfg: Config{BaseURL: "/v1", Model: "Qwen/Qwen3-8B"},
			routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(200, ""), "/version": send(200, `{"version":"0.10.2"}`), "/v1/models": send(200, modelsList)},
			want:   ServerInfo{ServedModel: "qwen3-8b", Root: "Qwen/Qwen3-8B", MaxModelLen: 32768, OwnedBy: "vllm", Version: "0.10.2", Models: []string{"qwen3-8b"}}},
		{name: "explicit served name, no /version", cfg: Config{ServedModel: "lora-a"},
			routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(200, ""), "/v1/models": send(200, twoModels)},
			want:   ServerInfo{ServedModel: "lora-a", Root: "Qwen/Qwen3-8B", MaxModelLen: 32768, OwnedBy: "vllm", Models: []string{"base", "lora-a"}}},
		{name: "explicit served name missing", cfg: Config{ServedModel: "nope"}, code: status.NotFound,
			routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(200, ""), "/v1/models": send(200, twoModels)},
			err:    `vllm: model "nope" is not served at http://127.0.0.1:`},
		{name: "ambiguous", cfg: Config{Model: "other/model"}, code: status.NotFound,
			routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(200, ""), "/v1/models": send(200, twoModels)},
			err:    "it serves base, lora-a"},
		{name: "engine dead", cfg: Config{Model: "m"}, code: status.Backend,
			routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(503, "")},
			err:    "vllm: GET http://127.0.0.1:"},
		{name: "not an OpenAI server", cfg: Config{Model: "m"}, code: status.Backend,
			routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(200, ""), "/v1/models": send(200, `<html>`)},
			err:    "/v1/models is not an OpenAI model list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := start(t, tt.cfg, func(w http.ResponseWriter, r *http.Request, n int) {
				if h, ok := tt.routes[r.URL.Path]; ok && r.Method == http.MethodGet {
					h(w, r, n)
					return
				}
				http.NotFound(w, r)
			})
			info, err := c.StartupCheck(context.Background())
			assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
			if tt.code != status.OK {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			assert.Equal(t, tt.want, info)
			assert.Equal(t, tt.want.ServedModel, c.ServedModel())
		})
	}
}

func TestNewNeedsAModel(t *testing.T) {
	_, err := New(Config{BaseURL: "http://127.0.0.1:1/v1"})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.EqualError(t, err, "vllm: a model or served model name is required")
	c, err := New(Config{BaseURL: "http://127.0.0.1:1/v1/", Model: "m"})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:1", c.Transport().BaseURL())
	assert.Equal(t, "m", c.ServedModel())
}

func TestDeadline(t *testing.T) {
	_, c := start(t, Config{}, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute): // the server would answer a minute late
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.Generate(ctx, generate.Request{Tokens: referencePrompt})
	assert.Less(t, time.Since(begin), 30*time.Second, "the call did not wait for the server's late answer")
	assert.Equal(t, status.Timeout, status.CodeOf(err))
	assert.True(t, strings.Contains(err.Error(), "/v1/completions"), "error: %v", err)
}

// FuzzParseResponse: no input panics, and whatever parses passes the alignment checks.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(referenceResponse), 8, 0)
	f.Add([]byte(completion(lp3+`,`+stopNull+`,`+ids3+`,"prompt_logprobs":[null,{"6":{"logprob":-3.1}}]`, usage3)), 3, 1)
	f.Fuzz(func(t *testing.T, body []byte, maxTokens, promptLogprobs int) {
		if maxTokens < 1 || maxTokens > 1<<16 {
			maxTokens = 256
		}
		params := generate.SamplingParams{MaxTokens: generate.Int(maxTokens), Logprobs: generate.Int(1)}
		if promptLogprobs >= 0 && promptLogprobs < 5 {
			params.PromptLogprobs = generate.Int(promptLogprobs)
		}
		p, _ := params.Resolve()
		res, err := parseResponse(body, []uint32{5, 6}, p)
		if err != nil {
			assert.Equal(t, status.Backend, status.CodeOf(err))
			return
		}
		if res.Validate(Name, maxTokens) == nil {
			assert.Len(t, res.Logprobs, len(res.Tokens))
			assert.Len(t, res.TopLogprobs, len(res.Tokens))
		}
	})
}
