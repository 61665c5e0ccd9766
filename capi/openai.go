package main

/*
#include "focus.h"
*/
import "C"

import (
	"context"
	"math"

	"github.com/focus-go/focus-go/backends/openai"
	"github.com/focus-go/focus-go/backends/sglang"
	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// Native API policies (OpenAI Chat Completions and Responses), their estimated token
// accounting, and the SGLang wire helpers behind policies whose transport is the caller's
// (Slime's post function) or whose results come from an SDK (Tinker).

// openaiPolicy adapts *openai.Client to io.Closer for the handle table.
type openaiPolicy struct{ *openai.Client }

func (p openaiPolicy) Close() error { p.Client.Close(); return nil }

type (
	wireOpenAIConfig  = binding.OpenAIConfig
	wireOpenAIRequest = binding.OpenAIRequest
)

//export focus_openai_open
func focus_openai_open(config *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var w wireOpenAIConfig
		if err := decodeJSON(config, n, "openai config", &w); err != nil {
			return err
		}
		cfg := openai.Config{API: openai.API(w.API), Model: w.Model, BaseURL: w.BaseURL, APIKey: w.APIKey,
			Headers: w.Headers, SystemPrompt: w.SystemPrompt, ReasoningEffort: w.ReasoningEffort,
			Timeout: seconds(w.TimeoutSeconds), MaxConcurrency: w.MaxConcurrency,
			Retry: transport.RetryPolicy{MaxRetries: w.MaxRetries}}
		cfg = cfg.WithEnv(func(k string) (string, bool) { v, ok := w.Env[k]; return v, ok && v != "" })
		c, err := openai.New(cfg)
		if err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(openaiPolicy{c}))
		return nil
	})
}

//export focus_openai_generate
func focus_openai_generate(h C.focus_handle, ticket C.uint64_t, request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		p, err := handleAs[openaiPolicy](uint64(h), "openai policy")
		if err != nil {
			return nil, err
		}
		var req wireOpenAIRequest
		if err := decodeJSON(request, n, "openai request", &req); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			res, err := p.Generate(ctx, openai.Request{Messages: req.Messages, Tools: req.Tools, ToolChoice: req.ToolChoice, Params: req.Params})
			if err != nil {
				return err
			}
			return returnJSON(out, res)
		}, nil
	})
}

//export focus_openai_validate
func focus_openai_validate(messages *C.char, n C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var msgs []openai.Message
		if err := decodeJSON(messages, n, "messages", &msgs); err != nil {
			return err
		}
		return openai.Validate(msgs)
	})
}

//export focus_native_estimate
func focus_native_estimate(request *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var req binding.EstimateRequest
		if err := decodeJSON(request, n, "estimate request", &req); err != nil {
			return err
		}
		text := ""
		if req.Text != nil {
			text = *req.Text
		} else {
			text = openai.RenderEstimate(req.Messages, req.Tools)
		}
		return returnJSON(out, map[string]any{"text": text, "tokens": openai.EstimateTokens(text)})
	})
}

//export focus_native_decode
func focus_native_decode(ids *C.uint32_t, count C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		setBytes(out, openai.DecodeEstimate(goIDs(ids, count)))
		return nil
	})
}

//export focus_sglang_request
func focus_sglang_request(prefix *C.uint32_t, count C.size_t, params *C.char, n C.size_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var sp generate.SamplingParams
		if err := decodeJSON(params, n, "sampling params", &sp); err != nil {
			return err
		}
		body, err := sglang.RequestBody(generate.Request{Tokens: goIDs(prefix, count), Params: sp})
		if err != nil {
			return err
		}
		setBytes(out, body)
		return nil
	})
}

//export focus_sglang_parse
func focus_sglang_parse(body *C.char, bodyLen C.size_t, prefix *C.uint32_t, count C.size_t, params *C.char, n C.size_t,
	out *C.focus_bytes, tokens **C.uint32_t, logprobs **C.double, generated *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var sp generate.SamplingParams
		if err := decodeJSON(params, n, "sampling params", &sp); err != nil {
			return err
		}
		req := generate.Request{Tokens: append([]uint32(nil), goIDs(prefix, count)...), Params: sp}
		res, err := sglang.ParseResponse(goBytes(body, bodyLen), req)
		if err != nil {
			return err
		}
		return returnResult(res, out, tokens, logprobs, generated)
	})
}

//export focus_result_validate
func focus_result_validate(backend *C.char, backendLen C.size_t, result *C.char, n C.size_t, maxTokens C.int64_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var r binding.ResultCheck
		if err := decodeJSON(result, n, "result", &r); err != nil {
			return err
		}
		if maxTokens < 1 {
			return status.Errorf(status.InvalidArgument, "result check: max_tokens %d must be ≥ 1", int64(maxTokens))
		}
		res := generate.Result{Tokens: r.Tokens, Logprobs: make([]float64, len(r.Logprobs)), StopReason: r.StopReason}
		for i, lp := range r.Logprobs {
			res.Logprobs[i] = math.NaN()
			if lp != nil {
				res.Logprobs[i] = *lp
			}
		}
		return res.Validate(goString(backend, backendLen), int(maxTokens))
	})
}
