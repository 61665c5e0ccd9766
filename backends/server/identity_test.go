package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/backends/server"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// sglangFake is a loopback SGLang server serving model at weight version version that
// answers every /generate with answer.
func sglangFake(t *testing.T, model, version, answer string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/health":
		case "/get_model_info":
			fmt.Fprintf(w, `{"model_path":%q,"tokenizer_path":%q,"is_generation":true,"weight_version":%q}`, model, model, version)
		case "/get_server_info":
			_, _ = io.WriteString(w, `{"version":"0.5.3","max_running_requests":4}`)
		case "/generate":
			_, _ = io.WriteString(w, answer)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// answer is a /generate reply with ids (each of logprob -0.5), finish type finish and
// weight version version.
func answer(ids []int, finish, version string) string {
	ids = append([]int{}, ids...)
	triples := make([][3]any, len(ids))
	for i, id := range ids {
		triples[i] = [3]any{-0.5, id, nil}
	}
	body, _ := json.Marshal(map[string]any{"text": "", "output_ids": ids, "meta_info": map[string]any{
		"finish_reason": map[string]string{"type": finish}, "prompt_tokens": 3, "completion_tokens": len(ids),
		"weight_version": version, "output_token_logprobs": triples}})
	return string(body)
}

func TestReplicasAreComparedByTheirFullIdentityOverHTTP(t *testing.T) {
	good := answer([]int{5, 6}, "length", "v1")
	for _, tc := range []struct {
		name   string
		a, b   [2]string // model, weight version
		allow  bool
		refuse string
	}{
		{"two checkpoints", [2]string{"/ckpt/run7/iter_0000100/hf", "v1"}, [2]string{"/ckpt/run7/iter_0000200/hf", "v1"}, false,
			`serves model "/ckpt/run7/iter_0000200/hf", weight version "v1", but replica 1 (%s) serves model "/ckpt/run7/iter_0000100/hf"`},
		{"two organisations", [2]string{"orgA/Qwen3-4B", "v1"}, [2]string{"orgB/Qwen3-4B", "v1"}, false, `the model differs`},
		{"two weight versions", [2]string{"m", "v1"}, [2]string{"m", "v2"}, false, `the weight version differs`},
		{"two weight versions, allowed", [2]string{"m", "v1"}, [2]string{"m", "v2"}, true, ""},
		{"one model", [2]string{"/models/m/", "v1"}, [2]string{"/models/m", "v1"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := sglangFake(t, tc.a[0], tc.a[1], good), sglangFake(t, tc.b[0], tc.b[1], good)
			p, err := server.Open(server.Config{Backend: "sglang", URLs: []string{a, b}, AllowWeightChange: tc.allow, VocabSize: 100})
			require.NoError(t, err)
			defer p.Close()
			_, err = p.StartupCheck(context.Background())
			if tc.refuse == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), fmt.Sprintf("replica 2 of 2 (%s)", b))
			want := tc.refuse
			if want[0] == 's' {
				want = fmt.Sprintf(want, a)
			}
			assert.Contains(t, err.Error(), want)
		})
	}
}

func TestMalformedAnswersFailOverOverHTTP(t *testing.T) {
	good := answer([]int{5, 6}, "length", "v1")
	for _, tc := range []struct {
		name, bad, alone string // alone: the error of a single replica answering bad ("" for none)
	}{
		{"zero-token stop", answer(nil, "stop", "v1"), `answered finish reason "stop" with no tokens`},
		{"out-of-vocabulary id", answer([]int{5, 100}, "length", "v1"), "answered token id 100 (generated token 2 of 2), outside the vocabulary of 100 ids"},
		{"abort", answer([]int{5}, "abort", "v1"), ""},
		{"new weight version", answer([]int{5, 6}, "length", "v2"), `answered with model "m", weight version "v2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, ok := sglangFake(t, "m", "v1", tc.bad), sglangFake(t, "m", "v1", good)
			p, err := server.Open(server.Config{Backend: "sglang", URLs: []string{bad, ok}, VocabSize: 100})
			require.NoError(t, err)
			defer p.Close()
			_, err = p.StartupCheck(context.Background())
			require.NoError(t, err)
			req := generate.Request{Tree: 1, Tokens: []uint32{1, 2, 3}, Params: generate.SamplingParams{MaxTokens: generate.Int(4)}}
			res, err := p.Generate(context.Background(), req)
			require.NoError(t, err, "the other replica answers")
			assert.Equal(t, []uint32{5, 6}, res.Tokens)
			assert.Equal(t, "v1", res.WeightVersion)
			assert.Equal(t, int64(1), p.Load().Replicas[0].Failed)

			alone, err := server.Open(server.Config{Backend: "sglang", URLs: []string{bad}, VocabSize: 100})
			require.NoError(t, err)
			defer alone.Close()
			_, err = alone.StartupCheck(context.Background())
			require.NoError(t, err)
			res, err = alone.Generate(context.Background(), req)
			if tc.alone == "" {
				require.NoError(t, err)
				assert.Equal(t, generate.StopReasonAbort, res.StopReason)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmt.Sprintf("replica 1 of 1 (%s) %s", bad, tc.alone))
		})
	}
}
