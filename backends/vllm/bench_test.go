package vllm

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/focus-go/focus-go/core/generate"
)

// bodyOf256 is a /v1/completions reply with 256 generated tokens (return_token_ids and
// token_id strings, logprobs 0) and a length finish.
func bodyOf256() []byte {
	var ids, toks, lps, tops strings.Builder
	for i := range 256 {
		if i > 0 {
			ids.WriteByte(',')
			toks.WriteByte(',')
			lps.WriteByte(',')
			tops.WriteByte(',')
		}
		id := 1000 + i
		// Logprobs with full round-trip precision, as servers print them.
		lp := fmt.Sprint(-float64(i%3) - float64(i*37%10000)/10007)
		fmt.Fprintf(&ids, "%d", id)
		fmt.Fprintf(&toks, `"token_id:%d"`, id)
		lps.WriteString(lp)
		fmt.Fprintf(&tops, `{"token_id:%d":%s}`, id, lp)
	}
	return []byte(`{"id":"cmpl-1","object":"text_completion","created":1760000001,"model":"m","choices":[{"index":0,"text":"` +
		strings.Repeat("tok ", 256) + `","logprobs":{"tokens":[` + toks.String() + `],"token_logprobs":[` + lps.String() +
		`],"top_logprobs":[` + tops.String() + `],"text_offset":null},"finish_reason":"length","stop_reason":null,"token_ids":[` +
		ids.String() + `],"prompt_token_ids":null,"prompt_logprobs":null}],"usage":{"prompt_tokens":512,"completion_tokens":256,"total_tokens":768,"prompt_tokens_details":null}}`)
}

// BenchmarkGenerate256 measures Generate round trips against a zero-latency fasthttp
// loopback server answering every request with 256 tokens (512-token prompts).
func BenchmarkGenerate256(b *testing.B) {
	body := bodyOf256()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()

	client, err := New(Config{BaseURL: "http://" + ln.Addr().String() + "/v1", ServedModel: "m", MaxConcurrency: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	prompt := make([]uint32, 512)
	for i := range prompt {
		prompt[i] = uint32(100 + i)
	}
	req := generate.Request{Tokens: prompt, Params: generate.SamplingParams{MaxTokens: generate.Int(256)}}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Generate(context.Background(), req)
			if err != nil || len(res.Tokens) != 256 {
				b.Errorf("generate: %v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(b.N)*256/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkParse256 measures decoding one 256-token reply.
func BenchmarkParse256(b *testing.B) {
	body := bodyOf256()
	p, _ := generate.SamplingParams{MaxTokens: generate.Int(256)}.Resolve()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseResponse(body, nil, p); err != nil {
			b.Fatal(err)
		}
	}
}
