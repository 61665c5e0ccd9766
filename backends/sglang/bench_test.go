package sglang

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
)

// bodyOf256 is a /generate reply with 256 generated tokens and a length finish.
func bodyOf256() []byte {
	var ids, lps strings.Builder
	for i := range 256 {
		if i > 0 {
			ids.WriteByte(',')
			lps.WriteByte(',')
		}
		fmt.Fprintf(&ids, "%d", 1000+i)
		// Logprobs with full round-trip precision, as servers print them.
		fmt.Fprintf(&lps, "[%v,%d,null]", -float64(i%3)-float64(i*37%10000)/10007, 1000+i)
	}
	return []byte(`{"text":"` + strings.Repeat("tok ", 256) + `","output_ids":[` + ids.String() +
		`],"meta_info":{"id":"r","finish_reason":{"type":"length","length":256},"prompt_tokens":512,` +
		`"completion_tokens":256,"cached_tokens":384,"e2e_latency":0.0,"output_token_logprobs":[` + lps.String() +
		`],"output_top_logprobs":null}}`)
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

	client, err := New(Config{BaseURL: "http://" + ln.Addr().String(), MaxConcurrency: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	prompt := make([]uint32, 512)
	for i := range prompt {
		prompt[i] = uint32(100 + i)
	}
	req := generate.Request{Tokens: prompt, Params: generate.SamplingParams{MaxTokens: generate.Int(256)}, ID: "bench"}
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
		if _, err := parseResponse(body, nil, p, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestBody1536 measures encoding one /generate body as Generate does (into the
// transport's pooled stream) for a continuing segment's prefix of 1,536 ids, the engine's
// per-segment request.
func BenchmarkRequestBody1536(b *testing.B) {
	prompt := make([]uint32, 1536)
	for i := range prompt {
		prompt[i] = uint32(100 + i*97%150000)
	}
	req := generate.Request{Tokens: prompt, Params: generate.SamplingParams{MaxTokens: generate.Int(256),
		Temperature: generate.Float64(1), Seed: generate.Int64(7)}, ID: "bench"}
	p, err := req.Params.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		stream := transport.JSON.BorrowStream(nil)
		stream.WriteVal(newRequest(req, p))
		if stream.Error != nil || len(stream.Buffer()) < 1536*4 {
			b.Fatal(stream.Error)
		}
		transport.JSON.ReturnStream(stream)
	}
}
