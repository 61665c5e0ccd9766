package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var client = &http.Client{Timeout: 20 * time.Second}

func startSim(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// call sends a request and returns status, headers and body.
func call(t testing.TB, method, url string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

// postJSON posts body and decodes a JSON answer into a generic value.
func postJSON(t testing.TB, url string, body any) (int, any) {
	t.Helper()
	code, _, raw := call(t, "POST", url, body)
	var v any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &v), "body: %s", raw)
	}
	return code, v
}

func obj(v any) map[string]any { return v.(map[string]any) }
func arr(v any) []any          { return v.([]any) }

// ids turns a JSON number array into token ids.
func ids(v any) []uint32 {
	var out []uint32
	for _, x := range arr(v) {
		out = append(out, uint32(x.(float64)))
	}
	return out
}

// chatPrompt renders one user turn with the generated template and tokenizes it.
func chatPrompt(t testing.TB, s *Server, user string) []uint32 {
	t.Helper()
	p, err := s.render([]any{map[string]any{"role": "user", "content": user}}, nil)
	require.NoError(t, err)
	return p
}

// generate calls /generate with one prompt and returns the response object.
func generate(t testing.TB, s *Server, prompt []uint32, params map[string]any) map[string]any {
	t.Helper()
	code, v := postJSON(t, s.URL()+"/generate", map[string]any{"input_ids": prompt, "sampling_params": params, "return_logprob": true})
	require.Equal(t, 200, code, "%v", v)
	return obj(v)
}

func concat(a, b []uint32) []uint32 { return append(append([]uint32(nil), a...), b...) }
