package main

/*
#include "focus.h"
*/
import "C"

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/focus-go/focus-go/backends/server"
	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/fleet"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

type wirePolicyConfig = binding.PolicyConfig

// serverConfig is the server.Config the wire form spells: base_urls, or the one base_url.
func serverConfig(w wirePolicyConfig) server.Config {
	urls := w.BaseURLs
	if len(urls) == 0 {
		urls = []string{w.BaseURL}
	}
	return server.Config{Backend: w.Backend, URLs: urls, Model: w.Model, ServedModel: w.ServedModel,
		APIKey: w.APIKey, Headers: w.Headers, Timeout: seconds(w.TimeoutSeconds),
		MaxConcurrency: w.MaxConcurrency, Capacity: w.Capacity, Routing: fleet.Routing(w.Routing), MaxRetries: w.MaxRetries,
		AllowWeightChange: w.AllowWeightChange, VocabSize: w.VocabSize}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// focus_policy_open opens a Go-native policy (backends/server.Open).
//
//export focus_policy_open
func focus_policy_open(config *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var w wirePolicyConfig
		if err := decodeJSON(config, n, "policy config", &w); err != nil {
			return err
		}
		p, err := server.Open(serverConfig(w))
		if err != nil {
			return err
		}
		*out = C.focus_handle(handles.put(p))
		return nil
	})
}

// startupInfo is the first replica's startup info (its fields at the top level, as a
// single server's) with the fleet's capacity and replicas under "fleet".
type startupInfo struct {
	Info any
	Load fleet.Load
}

func (s startupInfo) MarshalJSON() ([]byte, error) {
	fields := map[string]any{}
	if b, err := transport.JSON.Marshal(s.Info); err != nil {
		return nil, err
	} else if err := transport.JSON.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	fields["fleet"] = s.Load
	return transport.JSON.Marshal(fields)
}

// wireResult is generate.Result as Python reads it (json.loads): a missing prompt logprob
// (NaN) is null (None); other non-finite logprobs, SGLang's null top alternatives (NaN)
// and vLLM's -9999 floor (-Inf), keep their value as Python's NaN / -Infinity literals
// instead of failing the encoding or becoming a stand-in number.
type wireResult struct {
	*generate.Result
	TopLogprobs       []map[uint32]pyFloat `json:"top_logprobs"`
	PromptLogprobs    []*pyFloat           `json:"prompt_logprobs"`
	PromptTopLogprobs []map[uint32]pyFloat `json:"prompt_top_logprobs"`
}

func toWireResult(r *generate.Result) wireResult {
	w := wireResult{Result: r, TopLogprobs: pyMaps(r.TopLogprobs), PromptTopLogprobs: pyMaps(r.PromptTopLogprobs),
		PromptLogprobs: make([]*pyFloat, len(r.PromptLogprobs))}
	for i := range r.PromptLogprobs {
		if v := pyFloat(r.PromptLogprobs[i]); !math.IsNaN(float64(v)) {
			w.PromptLogprobs[i] = &v
		}
	}
	return w
}

// pyFloat is a float64 whose JSON is Python's: NaN, Infinity and -Infinity for the
// non-finite values (json.loads reads them; the JSON goes only to the Python wrapper).
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	switch v := float64(f); {
	case math.IsNaN(v):
		return []byte("NaN"), nil
	case math.IsInf(v, 1):
		return []byte("Infinity"), nil
	case math.IsInf(v, -1):
		return []byte("-Infinity"), nil
	default:
		return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
	}
}

func pyMaps(ms []map[uint32]float64) []map[uint32]pyFloat {
	if ms == nil {
		return nil
	}
	out := make([]map[uint32]pyFloat, len(ms))
	for i, m := range ms {
		if m == nil {
			continue
		}
		out[i] = make(map[uint32]pyFloat, len(m))
		for k, v := range m {
			out[i][k] = pyFloat(v)
		}
	}
	return out
}

// returnResult hands a Result to Python: the generated ids and their logprobs as two
// malloc'd arrays of *n entries, everything else as JSON. The caller passed the prefix, so
// it is not sent back.
func returnResult(r *generate.Result, out *C.focus_bytes, tokens **C.uint32_t, logprobs **C.double, n *C.size_t) error {
	if len(r.Logprobs) != len(r.Tokens) {
		return status.Errorf(status.Internal, "result has %d tokens but %d logprobs", len(r.Tokens), len(r.Logprobs))
	}
	meta := *r
	meta.Tokens, meta.Logprobs, meta.PrefixTokens = nil, nil, nil
	if err := returnJSON(out, toWireResult(&meta)); err != nil {
		return err
	}
	cIDs(r.Tokens, tokens, n)
	*logprobs = cFloats(r.Logprobs)
	return nil
}

//export focus_policy_generate
func focus_policy_generate(h C.focus_handle, ticket C.uint64_t, prefix *C.uint32_t, count C.size_t,
	params *C.char, n C.size_t, out *C.focus_bytes, tokens **C.uint32_t, logprobs **C.double, generated *C.size_t,
	errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		p, err := handleAs[*server.Policy](uint64(h), "policy")
		if err != nil {
			return nil, err
		}
		var sp generate.SamplingParams
		if err := decodeJSON(params, n, "sampling params", &sp); err != nil {
			return nil, err
		}
		req := generate.Request{Tokens: append([]uint32(nil), goIDs(prefix, count)...), Params: sp}
		return func(ctx context.Context) error {
			res, err := p.Generate(ctx, req)
			if err != nil {
				return err
			}
			return returnResult(res, out, tokens, logprobs, generated)
		}, nil
	})
}

//export focus_policy_startup_check
func focus_policy_startup_check(h C.focus_handle, ticket C.uint64_t, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		p, err := handleAs[*server.Policy](uint64(h), "policy")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			infos, err := p.StartupCheck(ctx)
			if err != nil {
				return err
			}
			return returnJSON(out, startupInfo{Info: infos[0], Load: p.Load()})
		}, nil
	})
}

// admission is an admitted tree's fleet ticket behind a handle: releasing the handle gives
// back what the ticket still reserves.
type admission struct{ *fleet.Ticket }

func (a admission) Close() error { a.Release(); return nil }

//export focus_policy_admit
func focus_policy_admit(h C.focus_handle, ticket C.uint64_t, width C.int64_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		p, err := handleAs[*server.Policy](uint64(h), "policy")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			t, err := p.Admit(ctx, int(width))
			if err != nil {
				return err
			}
			*out = C.focus_handle(handles.put(admission{t}))
			return nil
		}, nil
	})
}

//export focus_policy_load
func focus_policy_load(h C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		p, err := handleAs[*server.Policy](uint64(h), "policy")
		if err != nil {
			return err
		}
		return returnJSON(out, p.Load())
	})
}
