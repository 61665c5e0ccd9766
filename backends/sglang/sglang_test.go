package sglang

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

// The request and response of inference-apis.md §2.1/§2.2, byte for byte.
const (
	referenceRequest = `{"rid":"tree7-node3","input_ids":[151644,872,198,3838,374],"return_logprob":true,"logprob_start_len":-1,
 "top_logprobs_num":0,"return_text_in_logprobs":false,"stream":false,
 "sampling_params":{"max_new_tokens":256,"temperature":1.0,"top_p":1.0,"top_k":-1,"min_p":0.0,
   "stop":["</answer>"],"stop_token_ids":[151645],"skip_special_tokens":false,"no_stop_trim":true,
   "spaces_between_special_tokens":false,"repetition_penalty":1.0,"n":1}}`
	referenceResponse = `{"text":"2+2=4.</answer>","output_ids":[17,10,17,28,19,13,522],
 "meta_info":{"id":"tree7-node3","finish_reason":{"type":"stop","matched":"</answer>"},
   "prompt_tokens":5,"completion_tokens":7,"cached_tokens":3,"e2e_latency":0.41,
   "output_token_logprobs":[[-0.01,17,null],[-0.2,10,null],[-0.003,17,null],[-0.05,28,null],[-0.0001,19,null],[-1.3,13,null],[-0.4,522,null]],
   "output_top_logprobs":[null,null,null,null,null,null,null]}}`
)

var referencePrompt = []uint32{151644, 872, 198, 3838, 374}

func referenceParams() generate.SamplingParams {
	return generate.SamplingParams{
		Temperature: generate.Float64(1.0), MaxTokens: generate.Int(256), TopP: generate.Float64(1.0),
		Stop: []string{"</answer>"}, StopTokenIDs: []uint32{151645},
	}
}

// fake is an SGLang /generate server answering with fixed bodies; it records requests.
type fake struct {
	mu       sync.Mutex
	bodies   []string
	headers  []http.Header
	respond  func(w http.ResponseWriter, r *http.Request, n int)
	requests int
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(b))
	f.headers = append(f.headers, r.Header.Clone())
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

func start(t *testing.T, respond func(http.ResponseWriter, *http.Request, int)) (*fake, *Client) {
	t.Helper()
	f := &fake{respond: respond}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, Retry: transport.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return f, c
}

func TestReferenceExchange(t *testing.T) {
	f, c := start(t, send(200, referenceResponse))
	res, err := c.Generate(context.Background(), generate.Request{
		Tokens: referencePrompt, Params: referenceParams(), ID: "tree7-node3", RoutingKey: "tree7",
	})
	require.NoError(t, err)
	require.Len(t, f.bodies, 1)
	assert.JSONEq(t, referenceRequest, f.bodies[0], "the request must be Slime's /generate shape")
	assert.Equal(t, "tree7", f.headers[0].Get("X-SMG-Routing-Key"))
	assert.Equal(t, "application/json", f.headers[0].Get("Content-Type"))
	assert.Equal(t, &generate.Result{
		Tokens:          []uint32{17, 10, 17, 28, 19, 13, 522},
		PrefixTokens:    referencePrompt,
		Text:            "2+2=4.</answer>",
		StopReason:      "stop",
		MatchedStop:     generate.StopMatch{Kind: generate.MatchString, String: "</answer>"},
		Logprobs:        []float64{-0.01, -0.2, -0.003, -0.05, -0.0001, -1.3, -0.4},
		Entropy:         math.Round((0.01+0.2+0.003+0.05+0.0001+1.3+0.4)/7*1e12) / 1e12,
		ExactGeneration: true,
		PromptTokens:    5,
		CachedTokens:    3,
	}, roundEntropy(res))
}

// The weight version SGLang puts in every answer's meta_info is the Result's.
func TestTheAnswersWeightVersionIsKept(t *testing.T) {
	for _, tc := range []struct{ field, want string }{
		{`"weight_version":"step-20",`, "step-20"},
		{`"weight_version":null,`, ""},
		{"", ""},
	} {
		body := strings.Replace(referenceResponse, `"prompt_tokens":5,`, tc.field+`"prompt_tokens":5,`, 1)
		_, c := start(t, send(200, body))
		res, err := c.Generate(context.Background(), generate.Request{Tokens: referencePrompt, Params: referenceParams()})
		require.NoError(t, err)
		assert.Equal(t, tc.want, res.WeightVersion, "%s", tc.field)
	}
}

// roundEntropy makes the float sum comparable with the literal above.
func roundEntropy(r *generate.Result) *generate.Result {
	r.Entropy = math.Round(r.Entropy*1e12) / 1e12
	return r
}

func TestRequestShapes(t *testing.T) {
	tests := []struct {
		name   string
		params generate.SamplingParams
		want   string // sampling_params + top-level overrides, as a JSON subset
		check  func(t *testing.T, body map[string]any)
	}{
		{name: "defaults are sent explicitly", check: func(t *testing.T, body map[string]any) {
			sp := body["sampling_params"].(map[string]any)
			assert.Equal(t, 0.7, sp["temperature"])
			assert.Equal(t, 512.0, sp["max_new_tokens"])
			assert.Equal(t, 1.0, sp["top_p"])
			assert.Equal(t, -1.0, sp["top_k"])
			assert.Equal(t, []any{}, sp["stop"])
			assert.Equal(t, []any{}, sp["stop_token_ids"])
			assert.Equal(t, 1.0, sp["repetition_penalty"])
			assert.NotContains(t, sp, "sampling_seed")
			assert.Equal(t, -1.0, body["logprob_start_len"])
			assert.True(t, strings.HasPrefix(body["rid"].(string), "focus-"))
		}},
		{name: "seed, top-k 0 and top logprobs", params: generate.SamplingParams{Seed: generate.Int64(7), TopK: generate.Int(0), Logprobs: generate.Int(3)},
			check: func(t *testing.T, body map[string]any) {
				sp := body["sampling_params"].(map[string]any)
				assert.Equal(t, 7.0, sp["sampling_seed"])
				assert.Equal(t, -1.0, sp["top_k"])
				assert.Equal(t, 3.0, body["top_logprobs_num"])
			}},
		{name: "prompt logprobs start at 0", params: generate.SamplingParams{PromptLogprobs: generate.Int(2)},
			check: func(t *testing.T, body map[string]any) {
				assert.Equal(t, 0.0, body["logprob_start_len"])
				assert.Equal(t, 2.0, body["top_logprobs_num"])
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := start(t, send(200, referenceResponse))
			_, err := c.Generate(context.Background(), generate.Request{Tokens: referencePrompt, Params: tt.params})
			if tt.params.PromptLogprobs != nil || tt.params.Logprobs != nil {
				assert.Equal(t, status.Backend, status.CodeOf(err)) // the reference reply has neither
			} else {
				require.NoError(t, err)
			}
			var body map[string]any
			require.NoError(t, transport.JSON.Unmarshal([]byte(f.bodies[0]), &body))
			tt.check(t, body)
		})
	}
}

// reply builds a /generate body from parts, for the error cases.
func reply(outputIDs, finish, meta, logprobs string) string {
	s := `{"text":"x"`
	if outputIDs != "" {
		s += `,"output_ids":` + outputIDs
	}
	s += `,"meta_info":{"id":"r","finish_reason":` + finish + `,"prompt_tokens":5` + meta
	if logprobs != "" {
		s += `,"output_token_logprobs":` + logprobs
	}
	return s + `}}`
}

const threeLogprobs = `[[-0.5,1,null],[-0.25,2,null],[-0.125,3,null]]`

func TestResponses(t *testing.T) {
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
		{name: "stop on an EOS token id", body: reply("", `{"type":"stop","matched":151645}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: int64(151645)},
		{name: "length", body: reply("", `{"type":"length","length":3}`, "", threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "length", matched: nil},
		{name: "abort keeps the partial output", body: reply("", `{"type":"abort","message":"Abort before prefill","status_code":null,"err_type":null}`, "", threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "abort", check: func(t *testing.T, r *generate.Result) {
				assert.Equal(t, "Abort before prefill", r.AbortMessage)
			}},
		{name: "output_ids with prompt tokens prepended is ignored (sglang #17240)",
			body:   reply(`[151644,872,1,2,3]`, `{"type":"stop","matched":3}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: int64(3)},
		{name: "one-element array", body: "[" + reply("", `{"type":"length","length":3}`, "", threeLogprobs) + "]",
			tokens: []uint32{1, 2, 3}, stop: "length"},
		{name: "top logprobs", params: generate.SamplingParams{Logprobs: generate.Int(1)},
			body: `{"text":"ab","meta_info":{"finish_reason":{"type":"length","length":2},"completion_tokens":2,` +
				`"output_token_logprobs":[[-0.5,1,null],[-0.25,2,null]],"output_top_logprobs":[[[-0.5,1,null],[-1.5,9,null]],[[-0.25,2,null]]]}}`,
			tokens: []uint32{1, 2}, stop: "length", check: func(t *testing.T, r *generate.Result) {
				assert.Equal(t, []map[uint32]float64{{1: -0.5, 9: -1.5}, {2: -0.25}}, r.TopLogprobs)
			}},
		{name: "prompt logprobs", params: generate.SamplingParams{PromptLogprobs: generate.Int(0)},
			body: `{"text":"a","meta_info":{"finish_reason":{"type":"length","length":1},"completion_tokens":1,` +
				`"input_token_logprobs":[[null,151644,null],[-2.5,872,null],[-0.5,198,null],[-1,3838,null],[-3,374,null]],` +
				`"output_token_logprobs":[[-0.5,1,null]]}}`,
			tokens: []uint32{1}, stop: "length", check: func(t *testing.T, r *generate.Result) {
				require.Len(t, r.PromptLogprobs, 5)
				assert.True(t, math.IsNaN(r.PromptLogprobs[0]))
				assert.Equal(t, []float64{-2.5, -0.5, -1, -3}, r.PromptLogprobs[1:])
			}},

		{name: "too many tokens", params: generate.SamplingParams{MaxTokens: generate.Int(2)},
			body: reply("", `{"type":"length","length":3}`, "", threeLogprobs), code: status.Backend,
			err: "sglang: response has 3 tokens, max_tokens was 2"},
		{name: "no output_token_logprobs", body: reply(`[1,2,3]`, `{"type":"stop","matched":3}`, `,"completion_tokens":3`, ""),
			code: status.Backend, err: "sglang: response has no meta_info.output_token_logprobs; the server ignored return_logprob"},
		// SGLang's orjson writes -inf and NaN as null (sglang 0.5.23 srt/utils/json_response.py
		// dumps_json; the schema's LogprobEntry.logprob is Optional[float]): the response is
		// valid, the token has no logprob (NaN), and the entropy averages the others.
		{name: "null logprob (-inf or NaN on the server)", body: reply("", `{"type":"length","length":3}`, "", `[[-0.5,1,null],[null,2,null],[-0.125,3,null]]`),
			tokens: []uint32{1, 2, 3}, stop: "length", check: func(t *testing.T, r *generate.Result) {
				require.Len(t, r.Logprobs, 3)
				assert.Equal(t, -0.5, r.Logprobs[0])
				assert.True(t, math.IsNaN(r.Logprobs[1]))
				assert.Equal(t, -0.125, r.Logprobs[2])
				assert.InDelta(t, 0.3125, r.Entropy, 1e-12)
				n, first := r.NonFiniteLogprobs()
				assert.Equal(t, []int{1, 1}, []int{n, first})
			}},
		// Every shape of finish_reason.matched in SGLang's schema (api/v1/api_types.py
		// Matched = Union[int, str, MatchedTokens]; schedule_batch.py FINISH_MATCHED_TOKEN
		// takes Union[int, List[int]], FINISH_MATCHED_STR / FINISHED_MATCHED_REGEX a str).
		{name: "matched: one-id list", body: reply("", `{"type":"stop","matched":[3]}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: int64(3)},
		{name: "matched: empty list", body: reply("", `{"type":"stop","matched":[]}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: nil},
		{name: "matched: null (EOS with no recorded match)", body: reply("", `{"type":"stop","matched":null}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: nil},
		{name: "matched: stop regex text", body: reply("", `{"type":"stop","matched":"\n\n"}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: "\n\n"},
		{name: "matched: the NaN finish", body: reply("", `{"type":"stop","matched":"NaN happened"}`, `,"completion_tokens":3`, threeLogprobs),
			tokens: []uint32{1, 2, 3}, stop: "stop", matched: "NaN happened"},
		{name: "matched: several ids", body: reply("", `{"type":"stop","matched":[2,3]}`, `,"completion_tokens":3`, threeLogprobs),
			code: status.Backend, err: "sglang: meta_info.finish_reason.matched is a list of 2 token ids [2 3]; matched_stop holds one token id, a string or None"},
		{name: "matched: negative id", body: reply("", `{"type":"stop","matched":-1}`, `,"completion_tokens":3`, threeLogprobs),
			code: status.Backend, err: "sglang: meta_info.finish_reason.matched token id -1 is not an integer in [0, 2^32)"},
		{name: "positive logprob", body: reply("", `{"type":"length","length":3}`, "", `[[-0.5,1,null],[0.5,2,null],[-0.125,3,null]]`),
			code: status.Backend, err: "logprob 0.5 of token 1 (id 2)"},
		{name: "completion_tokens disagrees", body: reply("", `{"type":"length","length":4}`, `,"completion_tokens":4`, threeLogprobs),
			code: status.Backend, err: "sglang: meta_info.completion_tokens is 4 but output_token_logprobs has 3 entries"},
		{name: "output_ids disagrees", body: reply(`[1,2,4]`, `{"type":"length","length":3}`, "", threeLogprobs),
			code: status.Backend, err: "sglang: output_ids[2] is 4 but output_token_logprobs[2] has id 3"},
		{name: "unknown finish reason", body: reply("", `{"type":"weird"}`, "", threeLogprobs),
			code: status.Backend, err: `sglang: unknown finish reason "weird", expected stop, length or abort`},
		{name: "unfinished", body: reply("", `null`, "", threeLogprobs),
			code: status.Backend, err: "sglang: response has no meta_info.finish_reason"},
		{name: "triple without id", body: reply("", `{"type":"length","length":3}`, "", `[[-0.5]]`),
			code: status.Backend, err: "output_token_logprobs: entry 0 has no token id"},
		{name: "malformed JSON", body: `{"text":"x",,}`, code: status.Backend, err: "sglang: malformed or truncated JSON response (14 bytes)"},
		{name: "truncated JSON", body: referenceResponse[:200], code: status.Backend, err: "sglang: malformed or truncated JSON response (200 bytes)"},
		{name: "not an object", body: `"hello"`, code: status.Backend, err: `sglang: response is not a JSON object: "\"hello\""`},
		{name: "no meta_info", body: `{"text":"x"}`, code: status.Backend, err: "sglang: response has no meta_info"},
		{name: "top logprobs missing", params: generate.SamplingParams{Logprobs: generate.Int(2)},
			body: reply("", `{"type":"length","length":3}`, "", threeLogprobs), code: status.Backend,
			err: "sglang: 2 top logprobs were requested but the response has no output_top_logprobs"},
		{name: "top logprobs misaligned", params: generate.SamplingParams{Logprobs: generate.Int(2)},
			body: `{"meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[[-0.5,1,null],[-0.25,2,null]],"output_top_logprobs":[null]}}`,
			code: status.Backend, err: "sglang: response has 2 tokens but 1 top-logprob entries"},
		{name: "top logprobs null at a position", params: generate.SamplingParams{Logprobs: generate.Int(2)},
			body: `{"meta_info":{"finish_reason":{"type":"length"},"output_token_logprobs":[[-0.5,1,null],[-0.25,2,null]],"output_top_logprobs":[[[-0.5,1,null]],null]}}`,
			code: status.Backend, err: "sglang: top logprobs were requested but token 1 (id 2) has none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := start(t, send(200, tt.body))
			res, err := c.Generate(context.Background(), generate.Request{Tokens: referencePrompt, Params: tt.params})
			if tt.code != status.OK {
				assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
				assert.ErrorContains(t, err, tt.err)
				assert.Equal(t, int64(0), c.Transport().Stats().Retries, "a bad response is not retried")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.tokens, res.Tokens)
			assert.Equal(t, tt.stop, res.StopReason)
			assert.Equal(t, tt.matched, res.MatchedStop.Value())
			assert.Len(t, res.Logprobs, len(res.Tokens))
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
		requests int
	}{
		{name: "context length (input too long)", respond: send(400, `{"error":{"message":"The input (43028 tokens) is longer than the model's context length (40960 tokens)."}}`),
			code: status.InvalidArgument, err: "/generate: HTTP 400 Bad Request: context length exceeded: The input (43028 tokens)", requests: 1},
		{name: "context length (requested total)", respond: send(400, `{"error":{"message":"Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of 33000 tokens: 32000 tokens from the input messages and 1000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit."}}`),
			code: status.InvalidArgument, err: "context length exceeded: Requested token count", requests: 1},
		{name: "queue full 503 retried then success", requests: 2, respond: func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 0 {
				send(503, `{"error":{"message":"The request queue is full."}}`)(w, r, n)
				return
			}
			send(200, referenceResponse)(w, r, n)
		}},
		{name: "router 429 status-only retried then success", requests: 2, respond: func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 0 {
				w.WriteHeader(429)
				return
			}
			send(200, referenceResponse)(w, r, n)
		}},
		{name: "500 every time", respond: send(500, `{"error":{"message":"CUDA error"}}`), code: status.Backend,
			err: "HTTP 500 Internal Server Error: CUDA error (after 3 retries)", requests: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := start(t, tt.respond)
			res, err := c.Generate(context.Background(), generate.Request{Tokens: referencePrompt, Params: referenceParams()})
			assert.Equal(t, tt.code, status.CodeOf(err), "error: %v", err)
			assert.Equal(t, tt.requests, f.requests)
			if tt.code == status.OK {
				assert.Len(t, res.Tokens, 7)
				return
			}
			assert.ErrorContains(t, err, tt.err)
			assert.Equal(t, tt.err != "" && strings.Contains(tt.err, "context length"), transport.IsContextLength(err))
		})
	}
}

func TestBadRequests(t *testing.T) {
	_, c := start(t, send(200, referenceResponse))
	_, err := c.Generate(context.Background(), generate.Request{})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.EqualError(t, err, "sglang: prompt has no tokens; /generate needs at least one input id")
	_, err = c.Generate(context.Background(), generate.Request{Tokens: []uint32{1}, Params: generate.SamplingParams{TopP: generate.Float64(0)}})
	assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
	assert.EqualError(t, err, "sglang: sampling: top_p 0 must be in (0, 1]")
}

func TestCancelledGenerateReturnsPromptly(t *testing.T) {
	_, c := start(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute): // the server would answer a minute late
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	begin := time.Now()
	_, err := c.Generate(ctx, generate.Request{Tokens: referencePrompt})
	assert.Less(t, time.Since(begin), 30*time.Second, "the call did not wait for the server's late answer")
	assert.Equal(t, status.Cancelled, status.CodeOf(err))
}

func TestStartupCheck(t *testing.T) {
	modelInfo := `{"model_path":"Qwen/Qwen3-8B","tokenizer_path":"Qwen/Qwen3-8B","is_generation":true,"preferred_sampling_params":null,"weight_version":"default"}`
	tests := []struct {
		name   string
		routes map[string]func(http.ResponseWriter, *http.Request, int)
		want   ServerInfo
		code   status.Code
		err    string
	}{
		{name: "server", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/get_model_info": send(200, modelInfo),
			"/get_server_info": send(200, `{"context_length":40960,"tp_size":1,"version":"0.5.3"}`),
		}, want: ServerInfo{ModelPath: "Qwen/Qwen3-8B", TokenizerPath: "Qwen/Qwen3-8B", IsGeneration: true, WeightVersion: "default", Version: "0.5.3", ContextLength: 40960}},
		{name: "capacity", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/get_model_info": send(200, modelInfo),
			"/get_server_info": send(200, `{"context_length":4096,"max_running_requests":384,"version":"0.5.3"}`),
		}, want: ServerInfo{ModelPath: "Qwen/Qwen3-8B", TokenizerPath: "Qwen/Qwen3-8B", IsGeneration: true, WeightVersion: "default", Version: "0.5.3", ContextLength: 4096, MaxRunningRequests: 384}},
		{name: "capacity in internal states", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/get_model_info": send(200, modelInfo),
			"/get_server_info": send(200, `{"max_running_requests":null,"internal_states":[{"max_running_requests":96}]}`),
		}, want: ServerInfo{ModelPath: "Qwen/Qwen3-8B", TokenizerPath: "Qwen/Qwen3-8B", IsGeneration: true, WeightVersion: "default", MaxRunningRequests: 96}},
		{name: "newest names", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/model_info": send(200, modelInfo), "/server_info": send(200, `{"version":"0.6.0"}`),
		}, want: ServerInfo{ModelPath: "Qwen/Qwen3-8B", TokenizerPath: "Qwen/Qwen3-8B", IsGeneration: true, WeightVersion: "default", Version: "0.6.0"}},
		{name: "router without server info", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/get_model_info": send(200, modelInfo),
		}, want: ServerInfo{ModelPath: "Qwen/Qwen3-8B", TokenizerPath: "Qwen/Qwen3-8B", IsGeneration: true, WeightVersion: "default"}},
		{name: "starting", routes: map[string]func(http.ResponseWriter, *http.Request, int){"/health": send(503, "")},
			code: status.Backend, err: "/health: HTTP 503 Service Unavailable: (empty body) (after 3 retries)"},
		{name: "not sglang", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/get_model_info": send(200, `{"hello":"world"}`),
		}, code: status.Backend, err: "does not look like an SGLang server"},
		{name: "embedding model", routes: map[string]func(http.ResponseWriter, *http.Request, int){
			"/health": send(200, ""), "/get_model_info": send(200, `{"model_path":"bge","is_generation":false}`),
		}, code: status.InvalidArgument, err: "sglang: model bge at http://127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := start(t, func(w http.ResponseWriter, r *http.Request, n int) {
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
		})
	}
}

func TestAbort(t *testing.T) {
	f, c := start(t, send(200, `{}`))
	require.NoError(t, c.Abort(context.Background(), "tree7-node3"))
	assert.JSONEq(t, `{"rid":"tree7-node3"}`, f.bodies[0])
	assert.Equal(t, status.InvalidArgument, status.CodeOf(c.Abort(context.Background(), "")))
}

// FuzzParseResponse: no input panics, and whatever parses passes the alignment checks.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(referenceResponse), 8)
	f.Add([]byte(reply(`[1,2,3]`, `{"type":"abort","message":"m"}`, `,"completion_tokens":3`, threeLogprobs)), 3)
	f.Add([]byte(`[{"meta_info":{"finish_reason":"stop","output_token_logprobs":[]}}]`), 1)
	f.Fuzz(func(t *testing.T, body []byte, maxTokens int) {
		if maxTokens < 1 || maxTokens > 1<<16 {
			maxTokens = 256
		}
		p, _ := generate.SamplingParams{MaxTokens: generate.Int(maxTokens)}.Resolve()
		res, err := parseResponse(body, referencePrompt, p, false)
		if err != nil {
			assert.Equal(t, status.Backend, status.CodeOf(err))
			return
		}
		if res.Validate(Name, maxTokens) == nil {
			assert.Len(t, res.Logprobs, len(res.Tokens))
			assert.LessOrEqual(t, len(res.Tokens), maxTokens)
		}
	})
}
