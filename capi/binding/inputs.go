package binding

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"

	"github.com/focus-go/focus-go/backends/openai"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/session"
	"github.com/focus-go/focus-go/core/status"
)

// Input is one published JSON input of the C ABI.
type Input struct {
	// Name names the input in errors and in the schema ("collection spec").
	Name string
	// Functions are the C exports that read it.
	Functions []string
	// Type is the Go type it decodes into; its json tags are its keys.
	Type reflect.Type
}

// Inputs are the published inputs, in the schema's order. capi decodes each into its Type
// under its Name (Decode checks both); the simulated server's config and faults decode
// strictly too, but stay out of the schema (the sim package links the tokenizer, which
// this pure-Go package does not).
var Inputs = []Input{
	{"collection spec", []string{"focus_collect_start"}, reflect.TypeFor[session.Spec]()},
	{"policy config", []string{"focus_policy_open"}, reflect.TypeFor[PolicyConfig]()},
	{"sampling params", []string{"focus_policy_generate", "focus_sglang_request", "focus_sglang_parse"}, reflect.TypeFor[generate.SamplingParams]()},
	{"reward config", []string{"focus_tree_values", "focus_critic_targets", "focus_critic_fit", "focus_prepare", "focus_tree_html", "focus_tree_export"}, reflect.TypeFor[prepare.RewardConfig]()},
	{"openai config", []string{"focus_openai_open"}, reflect.TypeFor[OpenAIConfig]()},
	{"openai request", []string{"focus_openai_generate"}, reflect.TypeFor[OpenAIRequest]()},
	{"messages", []string{"focus_openai_validate"}, reflect.TypeFor[[]openai.Message]()},
	{"estimate request", []string{"focus_native_estimate"}, reflect.TypeFor[EstimateRequest]()},
	{"result", []string{"focus_result_validate"}, reflect.TypeFor[ResultCheck]()},
	{"parse request", []string{"focus_parse"}, reflect.TypeFor[ParseRequest]()},
	{"profile request", []string{"focus_profile_resolve"}, reflect.TypeFor[ProfileRequest]()},
	{"render request", []string{"focus_codec_render"}, reflect.TypeFor[RenderRequest]()},
	{"math grade request", []string{"focus_math_grade"}, reflect.TypeFor[GradeRequest]()},
	{"root messages request", []string{"focus_rules_root_messages"}, reflect.TypeFor[RootMessagesRequest]()},
	{"batch", []string{"focus_batch_from_json"}, reflect.TypeFor[prepare.Batch]()},
	{"critic rule request", []string{"focus_critic_rule"}, reflect.TypeFor[CriticRuleRequest]()},
}

var inputsByName = func() map[string]Input {
	m := make(map[string]Input, len(Inputs))
	for _, in := range Inputs {
		m[in.Name] = in
	}
	return m
}()

// keyTypes maps a type with its own JSON decoder to the type whose fields are its keys.
// The batch's types are read in the forms their package declares.
var keyTypes = func() map[reflect.Type]reflect.Type {
	forms := prepare.JSONForms()
	forms[reflect.TypeFor[session.Spec]()] = reflect.TypeFor[collectionSpec]()
	return forms
}()

// opaqueTypes are content the caller owns, passed on without a key check, by the name the
// schema gives their type: a chat message may carry whatever keys its template reads.
var opaqueTypes = map[reflect.Type]string{
	reflect.TypeFor[openai.Message]():      "message",
	reflect.TypeFor[prepare.Diagnostics](): "diagnostics",
}

// collectionSpec declares session.Spec's keys: its JSON is the Config's (collect.Config's
// UnmarshalJSON: timeouts in seconds, reward null for the default) with the parts beside
// it (session.Spec's UnmarshalJSON).
type collectionSpec struct {
	collect.Config
	Codec  uint64        `json:"codec"`
	Policy session.Part  `json:"policy"`
	Env    session.Part  `json:"env"`
	Critic *session.Part `json:"critic"`
	Turn   *session.Turn `json:"turn"`
	// Resume is a tree in its JSON form (the tree package checks its keys).
	Resume json.RawMessage `json:"resume"`
}

// PolicyConfig is focus_policy_open's config: a Go-native token policy (SGLang or vLLM)
// over one server or several replicas.
type PolicyConfig struct {
	Backend        string            `json:"backend"`
	BaseURL        string            `json:"base_url"`
	BaseURLs       []string          `json:"base_urls"`
	Model          string            `json:"model"`
	ServedModel    string            `json:"served_model"`
	APIKey         string            `json:"api_key"`
	Headers        map[string]string `json:"headers"`
	TimeoutSeconds float64           `json:"timeout"`
	MaxConcurrency int               `json:"max_concurrency"`
	Capacity       int               `json:"capacity"`
	Routing        string            `json:"routing"`
	MaxRetries     int               `json:"max_retries"`
	// AllowWeightChange accepts a weight version that changes during the run.
	AllowWeightChange bool `json:"allow_weight_change"`
	// VocabSize is the tokenizer's vocabulary size (0: ids are not checked against it).
	VocabSize int `json:"vocab_size"`
}

// OpenAIConfig is focus_openai_open's config: a native API policy (OpenAI Chat
// Completions or Responses).
type OpenAIConfig struct {
	API             string            `json:"api"`
	Model           string            `json:"model"`
	BaseURL         string            `json:"base_url"`
	APIKey          string            `json:"api_key"`
	Headers         map[string]string `json:"headers"`
	SystemPrompt    string            `json:"system_prompt"`
	ReasoningEffort string            `json:"reasoning_effort"`
	TimeoutSeconds  float64           `json:"timeout"`
	MaxConcurrency  int               `json:"max_concurrency"`
	MaxRetries      int               `json:"max_retries"`
	// Env is the caller's OPENAI_API_KEY / OPENAI_BASE_URL: the Go runtime's copy of the
	// process environment does not see changes the host language made after loading.
	Env map[string]string `json:"env"`
}

// OpenAIRequest is one focus_openai_generate request.
type OpenAIRequest struct {
	Messages   []openai.Message        `json:"messages"`
	Tools      []map[string]any        `json:"tools"`
	ToolChoice any                     `json:"tool_choice"`
	Params     generate.SamplingParams `json:"params"`
}

// EstimateRequest is focus_native_estimate's request: the text to estimate, or (Text
// null) the messages and tools whose rendering is estimated.
type EstimateRequest struct {
	Messages []openai.Message `json:"messages"`
	Tools    []map[string]any `json:"tools"`
	Text     *string          `json:"text"`
}

// ResultCheck is the result focus_result_validate checks.
type ResultCheck struct {
	Tokens     []uint32   `json:"tokens"`
	Logprobs   []*float64 `json:"logprobs"` // null: no logprob (NaN)
	StopReason string     `json:"stop_reason"`
}

// ToolCall is one tool call as it crosses the C ABI, in a parse request and in the
// actions it returns.
type ToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	// Error is "" for a well-formed call, else why it could not be decoded
	// (action.ToolCall.Error); Arguments then hold the raw call text.
	Error string `json:"error"`
}

// ParseResult is the generation a parse request reads.
type ParseResult struct {
	Tokens          []uint32   `json:"tokens"`
	Text            string     `json:"text"`
	StopReason      string     `json:"stop_reason"`
	NativeToolCalls []ToolCall `json:"native_tool_calls"`
}

// ParseRequest is focus_parse's request: a generation and the tool schemas of the turn.
type ParseRequest struct {
	Result ParseResult       `json:"result"`
	Tools  []json.RawMessage `json:"tools"`
}

// ProfileRequest is focus_profile_resolve's request.
type ProfileRequest struct {
	Model        string `json:"model"`
	ChatTemplate string `json:"chat_template"`
}

// RenderRequest is focus_codec_render's request: the messages and tools a chat template
// renders, and its keyword arguments.
type RenderRequest struct {
	Messages            json.RawMessage            `json:"messages"`
	Tools               json.RawMessage            `json:"tools"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
}

// GradeRequest is focus_math_grade's request.
type GradeRequest struct {
	Text  string `json:"text"`
	Label string `json:"label"`
}

// RootMessagesRequest is focus_rules_root_messages's request: the system prompt, the
// problem's prompt (a string or messages) and the env's reset observation.
type RootMessagesRequest struct {
	SystemPrompt string          `json:"system_prompt"`
	Prompt       json.RawMessage `json:"prompt"`
	Observation  json.RawMessage `json:"observation"`
}

// CriticRuleRequest is focus_critic_rule's request: the rule's settings (absent: the
// defaults of prepare.DefaultCriticRule), the state carried across batches, the batch to
// observe first (absent: none, only choose) and the user's critic_weight, which the rule
// keeps until it has a measurement.
type CriticRuleRequest struct {
	Threshold *float64             `json:"threshold"`
	MinNodes  *float64             `json:"min_nodes"`
	Decay     *float64             `json:"decay"`
	MaxKappa  *float64             `json:"max_kappa"`
	State     prepare.CriticRecord `json:"state"`
	Batch     *[]prepare.CriticFit `json:"batch"`
	BaseKappa float64              `json:"base_kappa"`
}

// CriticRuleAnswer is focus_critic_rule's answer: the rule in force, the state after the
// batch, and the choice for the next batch.
type CriticRuleAnswer struct {
	Rule   prepare.CriticRule   `json:"rule"`
	State  prepare.CriticRecord `json:"state"`
	Choice prepare.CriticChoice `json:"choice"`
}

// CriticRule answers a CriticRuleRequest: the batch observed (if any), then the choice.
func CriticRule(req CriticRuleRequest) (CriticRuleAnswer, error) {
	rule := prepare.DefaultCriticRule()
	for _, f := range []struct {
		v   *float64
		dst *float64
	}{{req.Threshold, &rule.Threshold}, {req.MinNodes, &rule.MinNodes}, {req.Decay, &rule.Decay}, {req.MaxKappa, &rule.MaxKappa}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if err := rule.Validate(); err != nil {
		return CriticRuleAnswer{}, err
	}
	if err := req.State.Validate(); err != nil {
		return CriticRuleAnswer{}, err
	}
	if req.BaseKappa < 0 || req.BaseKappa > prepare.MaxCriticWeight || math.IsNaN(req.BaseKappa) {
		return CriticRuleAnswer{}, status.Errorf(status.InvalidArgument, "critic rule: base_kappa = %g, want 0 <= base_kappa <= %d", req.BaseKappa, prepare.MaxCriticWeight)
	}
	state := req.State
	if req.Batch != nil {
		for i, f := range *req.Batch {
			if err := f.Validate(fmt.Sprintf("batch[%d]", i)); err != nil {
				return CriticRuleAnswer{}, err
			}
		}
		state = rule.Observe(state, *req.Batch)
	}
	return CriticRuleAnswer{Rule: rule, State: state, Choice: rule.Choose(state, req.BaseKappa)}, nil
}
