package main

/*
#include "focus.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/focus-go/focus-go/backends/chat"
	"github.com/focus-go/focus-go/backends/critic"
	"github.com/focus-go/focus-go/backends/parse"
	"github.com/focus-go/focus-go/core/bridge"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/mathenv"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// wirePart names one collaborator: a Go-native implementation or a remote Python object.
type wirePart struct {
	Kind    string  `json:"kind"`   // "native" | "remote" | "math" | "constant" | "http"
	Handle  uint64  `json:"handle"` // native policy
	Object  int64   `json:"object"` // remote
	Label   string  `json:"label"`  // math
	Value   float64 `json:"value"`  // constant
	URL     string  `json:"url"`    // http
	Timeout float64 `json:"timeout"`
}

type wireCollect struct {
	ProblemID      string                  `json:"problem_id"`
	PromptTokens   []uint32                `json:"prompt_tokens"`
	PromptText     string                  `json:"prompt_text"`
	Segments       int                     `json:"segments"`
	MaxSegments    int                     `json:"max_segments"`
	MaxTotalTokens int                     `json:"max_total_tokens"`
	Sampling       generate.SamplingParams `json:"sampling"`
	Search         search.Config           `json:"search"`
	Reward         *prepare.RewardConfig   `json:"reward"`
	AllowPartial   bool                    `json:"allow_partial"`
	MaxRetries     int                     `json:"max_retries"`
	PolicyTimeout  float64                 `json:"policy_timeout"`
	EnvTimeout     float64                 `json:"env_timeout"`
	CriticTimeout  float64                 `json:"critic_timeout"`
	Codec          uint64                  `json:"codec"`
	Policy         wirePart                `json:"policy"`
	Env            wirePart                `json:"env"`
	Critic         *wirePart               `json:"critic"`
	// Turn selects the whole-turn chat context (collect.Turns); absent or
	// null means exact-token segments.
	Turn *wireTurn `json:"turn"`
}

// wireTurn is the whole-turn context: the parser profile, the root messages and tool
// schemas the prompt was rendered from, and the chat template keyword arguments.
type wireTurn struct {
	Parser         string                     `json:"parser"`
	Messages       []json.RawMessage          `json:"messages"`
	Tools          json.RawMessage            `json:"tools"`
	TemplateKwargs map[string]json.RawMessage `json:"template_kwargs"`
}

// turns translates the wire form; the codec's template renders the tool messages.
func (w *wireTurn) turns(codec *chat.Codec) (*collect.Turns, error) {
	if codec == nil {
		return nil, status.Errorf(status.InvalidArgument, "collect: the whole-turn context needs a codec (a focus-go tokenizer) to render tool messages")
	}
	tools, err := chat.ParseTools(w.Tools)
	if err != nil {
		return nil, err
	}
	parser, err := parse.ForProfile(w.Parser, tools)
	if err != nil {
		return nil, err
	}
	tmpl, err := codec.RequireTemplate()
	if err != nil {
		return nil, err
	}
	kwargs := make(map[string]any, len(w.TemplateKwargs))
	for k, v := range w.TemplateKwargs {
		kwargs[k] = v
	}
	return &collect.Turns{Parser: parser, Template: turnTemplate{tmpl, kwargs}, Messages: w.Messages, Tools: tools}, nil
}

// turnTemplate adapts a chat template and its keyword arguments to collect.Template.
type turnTemplate struct {
	template *chat.Template
	kwargs   map[string]any
}

func (t turnTemplate) Render(messages, tools []json.RawMessage, addGenerationPrompt bool) (string, error) {
	return t.template.RenderJSON(messages, tools, addGenerationPrompt, t.kwargs)
}

// collection is one running collect.Run with the bridge its remote parts use.
type collection struct {
	bridge *bridge.Bridge
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	closer func() // releases parts the collection opened itself (an HTTP critic)

	result collect.Result
	err    error
}

func (c *collection) Close() error {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		c.bridge.Close()
		if c.closer != nil {
			c.closer()
		}
	})
	return nil
}

func (w *wireCollect) parts(b *bridge.Bridge, codec *chat.Codec) (collect.Policy, collect.Env, collect.Critic, func(), error) {
	var policy collect.Policy
	switch w.Policy.Kind {
	case "native":
		p, err := handleAs[closingPolicy](w.Policy.Handle, "policy")
		if err != nil {
			return nil, nil, nil, nil, err
		}
		policy = p
	case "remote":
		policy = bridge.Policy{Bridge: b, Object: w.Policy.Object}
	default:
		return nil, nil, nil, nil, status.Errorf(status.InvalidArgument, "collect: unknown policy kind %q, expected native or remote", w.Policy.Kind)
	}

	var env collect.Env
	switch w.Env.Kind {
	case "math":
		if codec == nil {
			return nil, nil, nil, nil, status.Errorf(status.InvalidArgument, "collect: the native MathEnv needs a codec to decode responses")
		}
		env = mathenv.New(w.Env.Label, func(ids []uint32) (string, error) { return codec.Decode(ids, false) })
	case "remote":
		env = bridge.Env{Bridge: b, Object: w.Env.Object}
	default:
		return nil, nil, nil, nil, status.Errorf(status.InvalidArgument, "collect: unknown env kind %q, expected math or remote", w.Env.Kind)
	}

	var scorer collect.Critic
	closer := func() {}
	if w.Critic != nil {
		switch w.Critic.Kind {
		case "constant":
			scorer = collect.ConstantCritic{Value: w.Critic.Value}
		case "http":
			s, err := critic.HTTP(w.Critic.URL, seconds(w.Critic.Timeout))
			if err != nil {
				return nil, nil, nil, nil, err
			}
			scorer, closer = s, s.Close
		case "remote":
			scorer = bridge.Critic{Bridge: b, Object: w.Critic.Object}
		default:
			return nil, nil, nil, nil, status.Errorf(status.InvalidArgument, "collect: unknown critic kind %q, expected constant, http or remote", w.Critic.Kind)
		}
	}
	return policy, env, scorer, closer, nil
}

// config is the validated collect.Config of w (codec: the chat codec handle's, or nil).
func (w *wireCollect) config(codec *chat.Codec) (collect.Config, error) {
	cfg := collect.Config{
		ProblemID: w.ProblemID, PromptTokens: w.PromptTokens, PromptText: w.PromptText,
		Segments: w.Segments, MaxSegments: w.MaxSegments, MaxTotalTokens: w.MaxTotalTokens,
		Sampling: w.Sampling, Search: w.Search, Reward: prepare.DefaultRewardConfig(),
		AllowPartial: w.AllowPartial, MaxRetries: w.MaxRetries,
		PolicyTimeout: seconds(w.PolicyTimeout), EnvTimeout: seconds(w.EnvTimeout), CriticTimeout: seconds(w.CriticTimeout),
	}
	if w.Reward != nil {
		cfg.Reward = *w.Reward
	}
	if codec != nil {
		cfg.Codec = codec.Tokenizer()
	}
	if w.Turn != nil {
		turns, err := w.Turn.turns(codec)
		if err != nil {
			return cfg, err
		}
		cfg.Turns = turns
	}
	return cfg, cfg.Validate()
}

//export focus_collect_start
func focus_collect_start(config *C.char, n C.size_t, out *C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		var w wireCollect
		if err := decodeJSON(config, n, "collect config", &w); err != nil {
			return err
		}
		var codec *chat.Codec
		if w.Codec != 0 {
			c, err := handleAs[*chat.Codec](w.Codec, "chat codec")
			if err != nil {
				return err
			}
			codec = c
		}
		cfg, err := w.config(codec)
		if err != nil {
			return err
		}
		b := bridge.New()
		policy, env, scorer, closer, err := w.parts(b, codec)
		if err != nil {
			b.Close()
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &collection{bridge: b, cancel: cancel, done: make(chan struct{}), closer: closer}
		go func() {
			c.result, c.err = collect.Run(ctx, cfg, policy, env, scorer)
			b.Close() // pollers learn that no more requests will come
			close(c.done)
		}()
		*out = C.focus_handle(handles.put(c))
		return nil
	})
}

func collectionOf(h C.focus_handle) (*collection, error) {
	return handleAs[*collection](uint64(h), "collection")
}

// polledRequest is a request as Python reads it: tokens is the [start, end) range of a
// policy.generate prefix in the poll's token array.
type polledRequest struct {
	bridge.Request
	Tokens *[2]int `json:"tokens,omitempty"`
}

// focus_collection_poll takes up to max queued requests for Python (see core/bridge for
// the kinds), with the policy.generate prefixes concatenated in one array.
//
//export focus_collection_poll
func focus_collection_poll(h C.focus_handle, ticket C.uint64_t, timeoutMs C.int64_t, limit C.int32_t, out *C.focus_bytes, tokens **C.uint32_t, nTokens *C.size_t, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		c, err := collectionOf(h)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			if timeoutMs >= 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
				defer cancel()
			}
			reqs, err := c.bridge.PollMany(ctx, int(limit))
			if err != nil {
				if bridge.IsClosed(err) {
					return status.Wrap(status.Cancelled, err, "collection finished")
				}
				return err
			}
			polled := make([]polledRequest, len(reqs))
			var ids []uint32
			for i, r := range reqs {
				polled[i].Request = r
				if r.Tokens != nil {
					polled[i].Tokens = &[2]int{len(ids), len(ids) + len(r.Tokens)}
					ids = append(ids, r.Tokens...)
				}
			}
			if err := returnJSON(out, polled); err != nil {
				return err
			}
			cIDs(ids, tokens, nTokens)
			return nil
		}, nil
	})
}

//export focus_collection_resolve
func focus_collection_resolve(h C.focus_handle, id C.uint64_t, payload *C.char, n C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		return c.bridge.Resolve(uint64(id), append([]byte(nil), goBytes(payload, n)...))
	})
}

// focus_collection_resolve_generate answers a policy.generate request with its ids and
// logprobs as arrays beside the JSON rest of the result.
//
//export focus_collection_resolve_generate
func focus_collection_resolve_generate(h C.focus_handle, id C.uint64_t, tokens *C.uint32_t, logprobs *C.double, n C.size_t, payload *C.char, payloadLen C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		lps := []float64{}
		if n > 0 {
			lps = slices.Clone(unsafe.Slice((*float64)(unsafe.Pointer(logprobs)), int(n)))
		}
		return c.bridge.Answer(uint64(id), bridge.Reply{
			Payload:  append([]byte(nil), goBytes(payload, payloadLen)...),
			Tokens:   append([]uint32{}, goIDs(tokens, n)...),
			Logprobs: lps,
		})
	})
}

//export focus_collection_fail
func focus_collection_fail(h C.focus_handle, id C.uint64_t, code C.int32_t, message *C.char, messageLen C.size_t, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		return c.bridge.Fail(uint64(id), status.Code(code), goString(message, messageLen))
	})
}

//export focus_collection_cancel
func focus_collection_cancel(h C.focus_handle, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		c.cancel()
		return nil
	})
}

// focus_collection_wait waits until the collection ends or timeout_ms passes (negative: no
// limit); *done says which.
//
//export focus_collection_wait
func focus_collection_wait(h C.focus_handle, ticket C.uint64_t, timeoutMs C.int64_t, done *C.int32_t, errOut *C.focus_bytes) C.focus_status {
	return run(ticket, errOut, func() (func(context.Context) error, error) {
		c, err := collectionOf(h)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			var timer <-chan time.Time
			if timeoutMs >= 0 {
				t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
				defer t.Stop()
				timer = t.C
			}
			select {
			case <-c.done:
				*done = 1
			case <-timer:
				*done = 0
			case <-ctx.Done():
				return status.Wrap(status.Cancelled, ctx.Err(), "collection wait")
			}
			return nil
		}, nil
	})
}

// focus_collection_result hands over the finished collection's tree (a new tree handle, 0
// if none) and *out = {"code", "message", "failures": [{"node_id", "message"}]}; code is
// the collection's status (0 = complete).
//
//export focus_collection_result
func focus_collection_result(h C.focus_handle, treeOut *C.focus_handle, out *C.focus_bytes, errOut *C.focus_bytes) C.focus_status {
	return guard(errOut, func() error {
		c, err := collectionOf(h)
		if err != nil {
			return err
		}
		select {
		case <-c.done:
		default:
			return status.Errorf(status.InvalidArgument, "collection: still running; wait for it first")
		}
		*treeOut = 0
		if c.result.Tree != nil {
			*treeOut = C.focus_handle(handles.put(c.result.Tree))
		}
		msg := ""
		if c.err != nil {
			msg = c.err.Error()
		}
		failures := c.result.Failures
		if failures == nil {
			failures = []collect.Failure{}
		}
		return returnJSON(out, map[string]any{"code": status.CodeOf(c.err), "message": msg, "failures": failures})
	})
}
