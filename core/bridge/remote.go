package bridge

import (
	"context"
	"math"
	"strconv"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

var wire = jsoniter.Config{EscapeHTML: false, SortMapKeys: true, ValidateJsonRawMessage: true}.Froze()

func encode(kind string, v any) ([]byte, error) {
	data, err := wire.Marshal(v)
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "bridge: encode %s payload", kind)
	}
	return data, nil
}

func decode(kind string, object int64, data []byte, v any) error {
	if err := wire.Unmarshal(data, v); err != nil {
		return status.Wrap(status.InvalidArgument, err, "bridge: %s reply from object %d is not the expected JSON", kind, object)
	}
	return nil
}

// Policy is a Python policy (a custom Completion, TinkerPolicy,
// SlimePolicy) served through the bridge; it satisfies collect.Policy.
type Policy struct {
	Bridge *Bridge
	Object int64
}

var _ collect.Policy = Policy{}

type generatePayload struct {
	Params generate.SamplingParams `json:"params"`
	ID     string                  `json:"id"`
}

type resultWire struct {
	Tokens       *[]uint32            `json:"tokens"`
	Logprobs     []*float64           `json:"logprobs"`
	Text         string               `json:"text"`
	StopReason   string               `json:"stop_reason"`
	MatchedStop  jsoniter.RawMessage  `json:"matched_stop"`
	TopLogprobs  []map[string]float64 `json:"top_logprobs"`
	PromptTokens int                  `json:"prompt_tokens"`
	CachedTokens int                  `json:"cached_tokens"`
	AbortMessage string               `json:"abort_message"`
	// Exact is Policy.is_exact(result): false when the ids are not the ones the model
	// sampled (Policy(exact=False), exact_generation False). Absent means exact.
	Exact *bool `json:"exact"`
}

// Generate sends a "policy.generate" request (the prefix in Request.Tokens) and decodes
// the Result, whose ids and logprobs come either beside the JSON (Reply.Tokens and
// Reply.Logprobs) or in it. The engine validates the result against the request; this
// only checks that the reply has the right shape.
func (p Policy) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	payload, err := encode(KindPolicyGenerate, generatePayload{Params: req.Params, ID: req.ID})
	if err != nil {
		return nil, err
	}
	rep, err := p.Bridge.Send(ctx, Request{Kind: KindPolicyGenerate, Object: p.Object, Payload: payload, Tokens: req.Tokens})
	if err != nil {
		return nil, err
	}
	var w resultWire
	if err := decode(KindPolicyGenerate, p.Object, rep.Payload, &w); err != nil {
		return nil, err
	}
	if rep.Tokens != nil {
		if len(rep.Logprobs) != len(rep.Tokens) {
			return nil, status.Errorf(status.InvalidArgument, "bridge: policy.generate reply from object %d has %d tokens but %d logprobs", p.Object, len(rep.Tokens), len(rep.Logprobs))
		}
		w.Tokens, w.Logprobs = &rep.Tokens, nil
	}
	if w.Tokens == nil {
		return nil, status.Errorf(status.InvalidArgument, "bridge: policy.generate reply from object %d has no \"tokens\" list", p.Object)
	}
	res := &generate.Result{
		Tokens: *w.Tokens, PrefixTokens: req.Tokens, Text: w.Text, StopReason: w.StopReason,
		PromptTokens: w.PromptTokens, CachedTokens: w.CachedTokens, AbortMessage: w.AbortMessage,
		ExactGeneration: w.Exact == nil || *w.Exact,
	}
	if rep.Tokens != nil {
		res.Logprobs = rep.Logprobs
	} else if w.Logprobs != nil {
		res.Logprobs = make([]float64, len(w.Logprobs))
		for i, lp := range w.Logprobs {
			if lp == nil {
				// null (Python's None) is no logprob: the engine makes the edge inexact.
				res.Logprobs[i] = math.NaN()
			} else {
				res.Logprobs[i] = *lp
			}
		}
	}
	if len(w.MatchedStop) > 0 && string(w.MatchedStop) != "null" {
		var id uint32
		var s string
		switch {
		case wire.Unmarshal(w.MatchedStop, &id) == nil:
			res.MatchedStop = generate.StopMatch{Kind: generate.MatchToken, Token: id}
		case wire.Unmarshal(w.MatchedStop, &s) == nil:
			res.MatchedStop = generate.StopMatch{Kind: generate.MatchString, String: s}
		default:
			return nil, status.Errorf(status.InvalidArgument, "bridge: policy.generate reply from object %d: matched_stop %s is not a token id, a string or null", p.Object, w.MatchedStop)
		}
	}
	if w.TopLogprobs != nil {
		res.TopLogprobs = make([]map[uint32]float64, len(w.TopLogprobs))
		for i, m := range w.TopLogprobs {
			if m == nil {
				continue
			}
			res.TopLogprobs[i] = make(map[uint32]float64, len(m))
			for k, v := range m {
				id, err := strconv.ParseUint(k, 10, 32)
				if err != nil {
					return nil, status.Errorf(status.InvalidArgument, "bridge: policy.generate reply from object %d: top_logprobs[%d] key %q is not a token id", p.Object, i, k)
				}
				res.TopLogprobs[i][uint32(id)] = v
			}
		}
	}
	res.Entropy = generate.SampleEntropy(res.Logprobs)
	return res, nil
}

// Env is a Python environment (an Env subclass) served through the bridge;
// it satisfies collect.Env. Forks are new Python objects whose handles the
// Python side returns from "env.fork".
type Env struct {
	Bridge *Bridge
	Object int64
}

var (
	_ collect.Env        = Env{}
	_ collect.StepForker = Env{}
)

type observationWire struct {
	Text     string                `json:"text"`
	Tokens   *[]uint32             `json:"tokens"`
	Messages []jsoniter.RawMessage `json:"messages"`
}

func (o *observationWire) observation() collect.Observation {
	if o == nil {
		return collect.Observation{}
	}
	obs := collect.Observation{Text: o.Text}
	for _, m := range o.Messages {
		obs.Messages = append(obs.Messages, append([]byte(nil), m...))
	}
	if o.Tokens != nil {
		obs.Tokens = *o.Tokens
		if obs.Tokens == nil {
			obs.Tokens = []uint32{}
		}
	}
	return obs
}

type resetReply struct {
	Observation *observationWire `json:"observation"`
}

// Reset sends "env.reset".
func (e Env) Reset(ctx context.Context) (collect.Observation, error) {
	data, err := e.Bridge.Call(ctx, KindEnvReset, e.Object, []byte(`{}`))
	if err != nil {
		return collect.Observation{}, err
	}
	var r resetReply
	if err := decode(KindEnvReset, e.Object, data, &r); err != nil {
		return collect.Observation{}, err
	}
	return r.Observation.observation(), nil
}

type actionWire struct {
	Kind      action.Kind    `json:"kind"`
	Tokens    *[]uint32      `json:"tokens,omitempty"`
	Finished  *bool          `json:"finished,omitempty"`
	Text      *string        `json:"text,omitempty"`
	Reasoning *string        `json:"reasoning,omitempty"`
	ToolCalls []toolCallWire `json:"tool_calls,omitempty"`
}

type toolCallWire struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Error     string `json:"error"`
}

func actionToWire(a action.Action) (actionWire, error) {
	w := actionWire{Kind: a.Kind}
	switch a.Kind {
	case action.KindTokens:
		if a.Chunk == nil {
			return w, status.Errorf(status.InvalidArgument, "bridge: token action without a chunk")
		}
		tokens := a.Chunk.Tokens
		if tokens == nil {
			tokens = []uint32{}
		}
		w.Tokens = &tokens
		w.Finished = &a.Chunk.Finished
	case action.KindText:
		w.Text = &a.Text
	case action.KindTool:
		if a.Turn == nil {
			return w, status.Errorf(status.InvalidArgument, "bridge: tool action without a turn")
		}
		w.Text, w.Reasoning = &a.Turn.Text, &a.Turn.Reasoning
		w.ToolCalls = make([]toolCallWire, len(a.Turn.ToolCalls))
		for i, c := range a.Turn.ToolCalls {
			w.ToolCalls[i] = toolCallWire{Name: c.Name, Arguments: c.Arguments, CallID: c.CallID, Error: c.Error}
		}
	default:
		return w, status.Errorf(status.InvalidArgument, "bridge: action kind %q, expected tokens, text or tool", a.Kind)
	}
	return w, nil
}

type stepPayload struct {
	Action actionWire `json:"action"`
	Fork   bool       `json:"fork,omitempty"`
}

type stepReply struct {
	Observation *observationWire    `json:"observation"`
	Reward      *float64            `json:"reward"`
	Done        bool                `json:"done"`
	Info        jsoniter.RawMessage `json:"info"`
	Object      *int64              `json:"object"` // the fork's handle, when one was asked for
}

// Step sends "env.step". A reply without a reward is an error (Python's
// Step always carries one); the engine rejects non-finite rewards.
func (e Env) Step(ctx context.Context, act action.Action) (collect.Step, error) {
	step, _, err := e.step(ctx, act, false)
	return step, err
}

// StepFork sends one "env.step" with "fork": true, so a snapshot costs no round trip of
// its own: the Python side steps, then forks unless the step is done, and replies with
// the fork's handle in "object" beside the step.
func (e Env) StepFork(ctx context.Context, act action.Action) (collect.Step, collect.Env, error) {
	return e.step(ctx, act, true)
}

func (e Env) step(ctx context.Context, act action.Action, fork bool) (collect.Step, collect.Env, error) {
	w, err := actionToWire(act)
	if err != nil {
		return collect.Step{}, nil, err
	}
	// A token action's ids travel beside the JSON (Request.Tokens), as a prefix does.
	var tokens []uint32
	if w.Tokens != nil {
		tokens, w.Tokens = *w.Tokens, nil
	}
	payload, err := encode(KindEnvStep, stepPayload{Action: w, Fork: fork})
	if err != nil {
		return collect.Step{}, nil, err
	}
	rep, err := e.Bridge.Send(ctx, Request{Kind: KindEnvStep, Object: e.Object, Payload: payload, Tokens: tokens})
	if err != nil {
		return collect.Step{}, nil, err
	}
	var r stepReply
	if err := decode(KindEnvStep, e.Object, rep.Payload, &r); err != nil {
		return collect.Step{}, nil, err
	}
	var twin collect.Env
	if r.Object != nil {
		twin = Env{Bridge: e.Bridge, Object: *r.Object}
		if !fork || r.Done {
			twin.Close() // not asked for: the engine keeps no snapshot of this step
			twin = nil
		}
	}
	fail := func(format string, args ...any) (collect.Step, collect.Env, error) {
		if twin != nil {
			twin.Close()
		}
		return collect.Step{}, nil, status.Errorf(status.InvalidArgument, format, args...)
	}
	if r.Reward == nil {
		return fail("bridge: env.step reply from object %d has no \"reward\"", e.Object)
	}
	if fork && !r.Done && twin == nil {
		return fail("bridge: env.step reply from object %d has no \"object\" handle for the fork it was asked for", e.Object)
	}
	step := collect.Step{Observation: r.Observation.observation(), Reward: *r.Reward, Done: r.Done}
	if len(r.Info) > 0 && string(r.Info) != "null" {
		step.Info = append([]byte(nil), r.Info...)
	}
	return step, twin, nil
}

type forkReply struct {
	Object *int64 `json:"object"`
}

// Fork sends "env.fork" and returns the new object's stand-in.
func (e Env) Fork(ctx context.Context) (collect.Env, error) {
	data, err := e.Bridge.Call(ctx, KindEnvFork, e.Object, []byte(`{}`))
	if err != nil {
		return nil, err
	}
	var r forkReply
	if err := decode(KindEnvFork, e.Object, data, &r); err != nil {
		return nil, err
	}
	if r.Object == nil {
		return nil, status.Errorf(status.InvalidArgument, "bridge: env.fork reply from object %d has no \"object\" handle", e.Object)
	}
	return Env{Bridge: e.Bridge, Object: *r.Object}, nil
}

// Close queues an "env.close" notification: it never blocks the engine.
func (e Env) Close() {
	e.Bridge.Notify(KindEnvClose, e.Object, []byte(`{}`))
}

// Critic is a Python critic function (Critic.from_function) served through
// the bridge; it satisfies collect.Critic.
type Critic struct {
	Bridge *Bridge
	Object int64
}

var _ collect.Critic = Critic{}

type scorePayload struct {
	Contexts []string `json:"contexts"`
}

type scoreReply struct {
	Values *[]float64 `json:"values"`
}

// Score sends "critic.score" and checks one finite value per context.
func (c Critic) Score(ctx context.Context, contexts []string) ([]float64, error) {
	if contexts == nil {
		contexts = []string{}
	}
	payload, err := encode(KindCriticScore, scorePayload{Contexts: contexts})
	if err != nil {
		return nil, err
	}
	data, err := c.Bridge.Call(ctx, KindCriticScore, c.Object, payload)
	if err != nil {
		return nil, err
	}
	var r scoreReply
	if err := decode(KindCriticScore, c.Object, data, &r); err != nil {
		return nil, err
	}
	if r.Values == nil {
		return nil, status.Errorf(status.InvalidArgument, "bridge: critic.score reply from object %d has no \"values\" list", c.Object)
	}
	if err := collect.CheckCriticValues(*r.Values, len(contexts)); err != nil {
		return nil, status.Wrap(status.Backend, err, "critic: python critic (object %d)", c.Object)
	}
	return *r.Values, nil
}
