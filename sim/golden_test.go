package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The golden test pins the server's wire output byte for byte: a fixed list of varied
// requests (SGLang /generate, vLLM /v1/completions, chat, responses; seeds, verbosity
// levels, deep prefixes, stop strings and ids, sampling parameters, batches, n > 1,
// faults, a small cache that evicts) is replayed against fresh servers in order and every
// response body must equal the recorded one. It exists so that the simulator can be made
// cheaper without changing what it says; -update re-records it (only when the output is
// meant to change).

var updateGolden = flag.Bool("update", false, "re-record testdata/golden.jsonl.gz from the current server")

const goldenPath = "testdata/golden.jsonl.gz"

// goldenServers are the configurations the golden requests run against, in order.
var goldenServers = []struct {
	name string
	cfg  Config
}{
	{"terse", Config{ModelName: "sim"}},
	{"bench", Config{ModelName: "sim", Verbosity: 3}},
	{"think-v1", Config{ModelName: "sim", Seed: 7, Verbosity: 1, Think: true}},
	{"raw-v2", Config{ModelName: "sim", Seed: 3, Verbosity: 2, LogprobMode: "raw", ToolCallErrorRate: 0.5}},
	{"no-cache", Config{ModelName: "sim", Verbosity: 3, Cache: Cache{Disabled: true}}},
	{"small-cache", Config{ModelName: "sim", Seed: 11, Verbosity: 3, Cache: Cache{Tokens: 700, BlockSize: 4}}},
	{"vllm-0.8", Config{ModelName: "sim", VLLMVersion: "0.8.5", ReturnTokensAsTokenIDs: true, Verbosity: 2}},
	{"vllm-0.12", Config{ModelName: "sim", VLLMVersion: "0.12.0", Verbosity: 1}},
	{"faults", Config{ModelName: "sim", Verbosity: 3, Faults: []Fault{
		{Kind: FaultExtraTokens, Count: 1, Tokens: 3}, {Kind: FaultAbort, Count: 1},
		{Kind: FaultPromptInOutputIDs, Count: 1}, {Kind: FaultMissingLogprobs, Count: 1}}}},
}

// goldenRecord is one request and the response it got.
type goldenRecord struct {
	Server string          `json:"server"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
	Reply  string          `json:"reply"`
}

// volatile matches the fields that depend on the clock, not on the request.
var volatile = regexp.MustCompile(`"(e2e_latency|created|created_at)":[-+.eE0-9]+`)

func normalizeReply(b []byte) string {
	return string(volatile.ReplaceAll(b, []byte(`"$1":0`)))
}

func TestGoldenResponses(t *testing.T) {
	if *updateGolden {
		recordGolden(t)
		return
	}
	want := readGolden(t)
	require.NotEmpty(t, want)
	byServer := map[string][]goldenRecord{}
	for _, r := range want {
		byServer[r.Server] = append(byServer[r.Server], r)
	}
	for _, gs := range goldenServers {
		t.Run(gs.name, func(t *testing.T) {
			recs := byServer[gs.name]
			require.NotEmpty(t, recs, "golden file has no requests for server %s", gs.name)
			s := startSim(t, gs.cfg)
			for i, r := range recs {
				code, _, raw := call(t, "POST", s.URL()+r.Path, r.Body)
				require.Equal(t, r.Status, code, "request %d (%s %s)", i, r.Path, r.Body)
				got := normalizeReply(raw)
				if got != r.Reply {
					require.Equal(t, r.Reply, got, "request %d (%s %s): reply differs from the recorded one", i, r.Path, r.Body)
				}
			}
		})
	}
}

func readGolden(t testing.TB) []goldenRecord {
	t.Helper()
	f, err := os.Open(goldenPath)
	require.NoError(t, err, "run go test -run TestGoldenResponses -update to record it")
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var out []goldenRecord
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var r goldenRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

func recordGolden(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	n := 0
	for _, gs := range goldenServers {
		s := startSim(t, gs.cfg)
		for _, c := range goldenRequests(t, gs.name, s) {
			body, err := json.Marshal(c.body)
			require.NoError(t, err)
			code, _, raw := call(t, "POST", s.URL()+c.path, json.RawMessage(body))
			require.NoError(t, enc.Encode(goldenRecord{Server: gs.name, Path: c.path, Body: body, Status: code, Reply: normalizeReply(raw)}))
			n++
		}
	}
	require.NoError(t, zw.Close())
	require.NoError(t, os.MkdirAll(filepath.Dir(goldenPath), 0o755))
	require.NoError(t, os.WriteFile(goldenPath, buf.Bytes(), 0o644))
	t.Logf("recorded %d requests, %d bytes", n, buf.Len())
}

type goldenReq struct {
	path string
	body any
}

// goldenRequests builds the request list for one server. Deep prefixes are the model's own
// output, cut at varied points (the engine's continuation requests).
func goldenRequests(t *testing.T, server string, s *Server) []goldenReq {
	t.Helper()
	probs := Problems()
	user := func(i int) map[string]any {
		return map[string]any{"role": "user", "content": probs[i%len(probs)].Prompt}
	}
	chat := func(i int) []uint32 { return chatPrompt(t, s, probs[i%len(probs)].Prompt) }
	// prefix is prompt + the first k tokens the model writes for it under seed.
	prefix := func(prompt []uint32, seed uint64, k int) []uint32 {
		res := s.model.generate(prompt, sampling{maxTokens: k, temperature: 1, topP: 1, topK: -1, seed: seed}, toolMode{})
		return concat(prompt, res.ids)
	}
	// engine is the request the Go engine sends for one segment.
	engine := func(prompt []uint32, seed int64, maxTok int, rid string) goldenReq {
		return goldenReq{"/generate", map[string]any{"rid": rid, "input_ids": prompt, "return_logprob": true,
			"logprob_start_len": -1, "top_logprobs_num": 0, "return_text_in_logprobs": false, "stream": false,
			"sampling_params": map[string]any{"max_new_tokens": maxTok, "temperature": 1.0, "top_p": 1.0, "top_k": -1,
				"min_p": 0.0, "stop": []string{}, "stop_token_ids": []uint32{}, "skip_special_tokens": false,
				"no_stop_trim": true, "spaces_between_special_tokens": false, "repetition_penalty": 1.0, "n": 1,
				"sampling_seed": seed}}}
	}
	gen := func(body map[string]any) goldenReq { return goldenReq{"/generate", body} }
	cmpl := func(body map[string]any) goldenReq { return goldenReq{"/v1/completions", body} }
	chatReq := func(body map[string]any) goldenReq { return goldenReq{"/v1/chat/completions", body} }
	var out []goldenReq
	switch server {
	case "terse", "think-v1", "raw-v2", "bench":
		for i := 0; i < 4; i++ {
			p := chat(i * 3)
			out = append(out, engine(p, int64(100+i), 256, fmt.Sprintf("tree%d-root", i)))
			for j, k := range []int{1, 37, 150} {
				out = append(out, engine(prefix(p, uint64(100+i), k), int64(200+10*i+j), 256, fmt.Sprintf("tree%d-n%d", i, j)))
			}
		}
		p := chat(5)
		out = append(out,
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 40, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "min_p": 0.05}, "return_logprob": true, "top_logprobs_num": 3, "return_text_in_logprobs": true}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 300, "temperature": 0}, "return_logprob": true}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 300, "stop": []string{"=", "Step 2"}, "sampling_seed": 9}}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 300, "stop": "\n", "no_stop_trim": true, "sampling_seed": 9}}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 100, "stop_token_ids": []int{198, 13}, "min_new_tokens": 5, "sampling_seed": 10}, "return_logprob": true}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 60, "ignore_eos": true, "skip_special_tokens": false}}),
			gen(map[string]any{"text": "Compute 17 * 23 + 45.", "sampling_params": map[string]any{"max_new_tokens": 80}, "return_logprob": true, "top_logprobs_num": 2}),
			gen(map[string]any{"text": "<|im_start|>user\nWhat is the weather?<|im_end|>\n<|im_start|>assistant\n", "sampling_params": map[string]any{"max_new_tokens": 50, "sampling_seed": 1}}),
			gen(map[string]any{"input_ids": []uint32{1, 2, 3, 4}, "sampling_params": map[string]any{"max_new_tokens": 30}, "return_logprob": true}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 20, "temperature": -1}}),
			gen(map[string]any{"input_ids": p, "sampling_params": map[string]any{"max_new_tokens": 0}, "return_logprob": true}),
			cmpl(map[string]any{"model": "sim", "prompt": chat(7), "max_tokens": 200, "logprobs": 2, "seed": 4}),
			cmpl(map[string]any{"prompt": probs[8].Prompt, "max_tokens": 120, "temperature": 0.5, "stop": []string{"."}, "include_stop_str_in_output": true}),
			cmpl(map[string]any{"prompt": chat(9), "max_tokens": 64, "stop_token_ids": []int{198}, "return_token_ids": true, "logprobs": 0}),
			chatReq(map[string]any{"model": "sim", "messages": []any{user(10)}, "tools": []any{calculator}, "logprobs": true, "top_logprobs": 2, "seed": 1}),
			chatReq(map[string]any{"messages": []any{map[string]any{"role": "system", "content": "Be brief."}, user(11)}, "max_tokens": 150, "temperature": 0.8, "seed": 2, "logprobs": true, "return_token_ids": true}),
			chatReq(map[string]any{"messages": []any{user(12)}, "tools": []any{calculator}, "tool_choice": "none", "max_completion_tokens": 120}),
			goldenReq{"/v1/responses", map[string]any{"input": probs[13].Prompt, "max_output_tokens": 200, "include": []string{"message.output_text.logprobs"}, "top_logprobs": 1, "seed": 5}},
			goldenReq{"/v1/responses", map[string]any{"input": []any{user(14)}, "tools": []any{map[string]any{"type": "function", "name": "calculator", "parameters": obj(obj(calculator["function"])["parameters"])}}, "seed": 6}},
			// prompt logprobs and streaming (issue #15): SGLang input_token_logprobs, vLLM
			// prompt_logprobs, and stream=true on the three streamed endpoints
			gen(map[string]any{"input_ids": chat(15), "sampling_params": map[string]any{"max_new_tokens": 12, "sampling_seed": 2}, "return_logprob": true, "logprob_start_len": 0, "top_logprobs_num": 2}),
			gen(map[string]any{"input_ids": chat(16), "sampling_params": map[string]any{"max_new_tokens": 12, "sampling_seed": 3}, "return_logprob": true, "stream": true}),
			cmpl(map[string]any{"prompt": chat(17), "max_tokens": 12, "logprobs": 1, "prompt_logprobs": 2, "seed": 4}),
			cmpl(map[string]any{"prompt": chat(18), "max_tokens": 12, "logprobs": 1, "seed": 5, "return_token_ids": true, "stream": true, "stream_options": map[string]any{"include_usage": true}}),
			chatReq(map[string]any{"messages": []any{user(19)}, "max_tokens": 16, "seed": 6, "logprobs": true, "stream": true, "stream_options": map[string]any{"include_usage": true}}),
			chatReq(map[string]any{"messages": []any{user(20)}, "tools": []any{calculator}, "seed": 7, "stream": true}),
		)
	case "no-cache":
		p, q := chat(1), chat(2)
		out = append(out,
			gen(map[string]any{"input_ids": [][]uint32{p, prefix(q, 3, 80)}, "sampling_params": map[string]any{"max_new_tokens": 200, "n": 2}, "return_logprob": true, "rid": "batch"}),
			gen(map[string]any{"input_ids": [][]uint32{p, q}, "sampling_params": []any{map[string]any{"max_new_tokens": 50, "sampling_seed": 1}, map[string]any{"max_new_tokens": 70, "temperature": 0}}, "return_logprob": []bool{true, false}, "top_logprobs_num": []int{1, 0}}),
			cmpl(map[string]any{"prompt": [][]uint32{p, q}, "max_tokens": 90, "n": 2, "seed": 8, "logprobs": 1}),
			chatReq(map[string]any{"messages": []any{user(4)}, "n": 3, "seed": 3, "max_tokens": 100, "logprobs": true}),
			engine(prefix(p, 5, 200), 77, 256, "deep"),
		)
	case "small-cache":
		for i := 0; i < 6; i++ {
			p := chat(i)
			out = append(out, engine(p, int64(i), 256, fmt.Sprintf("a%d", i)), engine(prefix(p, uint64(i), 90), int64(i+50), 256, fmt.Sprintf("b%d", i)))
			out = append(out, cmpl(map[string]any{"prompt": prefix(chat(i/2), uint64(i), 30), "max_tokens": 40, "seed": i}))
		}
	case "vllm-0.8", "vllm-0.12":
		for i := 0; i < 3; i++ {
			out = append(out,
				cmpl(map[string]any{"prompt": prefix(chat(i*5), uint64(i), 40*i), "max_tokens": 150, "logprobs": i, "seed": i, "return_token_ids": true, "return_tokens_as_token_ids": i == 1}),
				cmpl(map[string]any{"prompt": chat(i * 5), "max_tokens": 150, "stop": []string{"Step"}, "skip_special_tokens": false}))
		}
		out = append(out, cmpl(map[string]any{"prompt": chat(0), "max_tokens": 100000}), cmpl(map[string]any{"model": "nope", "prompt": []int{1}}))
	case "faults":
		for i := 0; i < 6; i++ {
			out = append(out, engine(chat(i), int64(i), 64, fmt.Sprintf("f%d", i)))
		}
	}
	return out
}

const digestPath = "testdata/model_digest.txt"

// TestGoldenModelDigest pins model.generate itself over a wider grid than the HTTP golden
// file can hold: every bundled problem, each verbosity level, several seeds, prefixes and
// sampling settings. The digest covers every id, logprob bit pattern, top candidate and
// finish field.
func TestGoldenModelDigest(t *testing.T) {
	s := startSim(t, Config{})
	h := sha256.New()
	samplings := []sampling{
		{maxTokens: 300, temperature: 1, topP: 1, topK: -1},
		{maxTokens: 120, temperature: 0.6, topP: 0.9, topK: 3, minP: 0.02, topN: 3},
		{maxTokens: 120, temperature: 1.3, topP: 1, topK: -1, raw: true, topN: 2},
		{maxTokens: 200, temperature: 0, topP: 1, topK: -1, stopStrs: []string{"= 1", "check"}},
		{maxTokens: 80, temperature: 1, topP: 0.5, topK: -1, stopIDs: []uint32{13}, minTokens: 10, ignoreEOS: true},
	}
	n := 0
	for verb := 0; verb <= MaxVerbosity; verb++ {
		for _, think := range []bool{false, true} {
			m := &model{v: s.model.v, think: think, toolErr: 0.3, verb: verb}
			for pi, p := range Problems() {
				prompt := chatPrompt(t, s, p.Prompt)
				for si, sp := range samplings {
					sp.seed = uint64(1000*verb + 10*pi + si)
					first := m.generate(prompt, sp, toolMode{})
					digestResult(h, first)
					cut := concat(prompt, first.ids[:len(first.ids)/3])
					digestResult(h, m.generate(cut, sp, toolMode{force: si == 4 && pi%2 == 0, name: "calculator"}))
					n += 2
				}
			}
		}
	}
	got := fmt.Sprintf("%x %d\n", h.Sum(nil), n)
	if *updateGolden {
		require.NoError(t, os.WriteFile(digestPath, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(digestPath)
	require.NoError(t, err, "run go test -run TestGoldenModelDigest -update to record it")
	require.Equal(t, string(want), got, "model.generate output changed")
}

func digestResult(h hash.Hash, r genResult) {
	var b []byte
	for i, id := range r.ids {
		b = binary.LittleEndian.AppendUint32(b, id)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.lps[i]))
	}
	for _, top := range r.tops {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(top)))
		for _, c := range top {
			b = binary.LittleEndian.AppendUint32(b, c.id)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.p))
		}
	}
	b = fmt.Appendf(b, "|%s|%d|%q|%v|%d|%d|%s|", r.finish, r.matchedID, r.matchedStr, r.hasStr, r.cached, r.promptLen, r.abortMsg)
	h.Write(b)
}
