package collect

import (
	"fmt"
	"time"

	"github.com/focus-go/focus-go/core/action"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
)

// Defaults of the agent's limits (ALGORITHM.md §5.8); capi/binding hands them to the
// bindings (docs/architecture.md, "Rules and defaults: capi/binding").
const (
	DefaultSegments       = 256
	DefaultMaxSegments    = 64
	DefaultMaxTotalTokens = 8192
)

// Config is one collection: the problem, the agent's exact-token context
// (Segments), its limits and sampling settings, the search and the reward
// settings the search plans with. Its JSON form (see UnmarshalJSON) is the
// one the Python package sends; Turns and Codec are objects, not data, and
// have none.
type Config struct {
	// ProblemID names the problem in the tree and feeds the seeded hash.
	ProblemID string `json:"problem_id"`
	// PromptTokens is the root prompt exactly as the policy sees it (the
	// caller renders the chat template); PromptText is its display text.
	PromptTokens []uint32 `json:"prompt_tokens"`
	PromptText   string   `json:"prompt_text"`

	// Segments is L: every policy call continues the checkpoint's exact
	// token prefix with max_tokens = min(L, MaxTotalTokens - generated so
	// far on the path). 0 means DefaultSegments. With Turns it is the
	// token limit of one assistant turn (the sampling max_tokens).
	Segments int `json:"segments"`
	// Turns, when set, selects the whole-turn chat context (one assistant
	// turn per segment, see Turns); nil means exact-token segments. It needs
	// a Codec.
	Turns *Turns `json:"-"`
	// MaxSegments caps the segments (edges) on one root-to-leaf path; a path
	// still running at the cap ends truncated. 0 means DefaultMaxSegments.
	MaxSegments int `json:"max_segments"`
	// MaxTotalTokens is T_max, the generated policy tokens allowed on one
	// root-to-leaf path (observation tokens do not count); a path that
	// reaches it without finishing ends truncated with reward
	// Reward.TruncatedReward. 0 means DefaultMaxTotalTokens.
	MaxTotalTokens int `json:"max_total_tokens"`

	// Sampling are the base sampling parameters of every request. The
	// engine sets MaxTokens (see Segments) and Seed (derived from the
	// rollout's seed and the segment index) on each request.
	Sampling generate.SamplingParams `json:"sampling"`
	// RoutingKey, when set, is sent with every request (X-SMG-Routing-Key)
	// so that an SGLang router keeps the whole tree on one worker.
	RoutingKey string `json:"routing_key"`

	// Search is Selective(budget, warmup) or Independent(n).
	Search search.Config `json:"search"`
	// Reward is what the search plans with; env rewards must lie in
	// [RewardMin, RewardMax].
	Reward prepare.RewardConfig `json:"reward"`

	// AllowPartial keeps a collection with failed rollouts or critic calls
	// without an error; the failures are still reported in Result.Failures
	// (and the failed rollouts are marked in the tree).
	AllowPartial bool `json:"allow_partial"`
	// MaxRetries is how many times a failed rollout is retried from the same
	// checkpoint, each retry costing one budget unit (default 0).
	MaxRetries int `json:"max_retries"`
	// StopOnAbort ends the collection at the first generation the server aborted
	// (finish reason "abort", action.ErrAborted), as a trainer that aborted its
	// rollout (Slime) wants: the calls in flight are cancelled at once, no rollout or
	// retry is launched after it, and Run returns the tree so far with a
	// status.Collection error wrapping a *FailureError that lists the aborted rollout,
	// whatever AllowPartial says. Off: the aborted rollout is one failed rollout and
	// the search goes on.
	StopOnAbort bool `json:"stop_on_abort"`

	// Per-call timeouts; 0 means only the collection's context bounds the
	// call. A call that times out fails its rollout (or critic batch).
	PolicyTimeout time.Duration `json:"policy_timeout"`
	EnvTimeout    time.Duration `json:"env_timeout"`
	CriticTimeout time.Duration `json:"critic_timeout"`

	// Codec decodes generated tokens into node text and encodes observation
	// text into conditioning tokens. Without one, node text is the policy's
	// own Result.Text and observations must carry exact Tokens.
	Codec Codec `json:"-"`
}

// withDefaults fills the zero limits with their defaults.
func (c Config) withDefaults() Config {
	if c.Segments == 0 {
		c.Segments = DefaultSegments
	}
	if c.MaxSegments == 0 {
		c.MaxSegments = DefaultMaxSegments
	}
	if c.MaxTotalTokens == 0 {
		c.MaxTotalTokens = DefaultMaxTotalTokens
	}
	return c
}

// Validate checks the configuration after defaults: positive limits, a
// non-empty prompt, a valid search and reward configuration, non-negative
// retries and timeouts, and base sampling parameters that resolve.
func (c Config) Validate() error {
	c = c.withDefaults()
	if e := (AgentLimits{Segments: c.Segments, MaxSegments: c.MaxSegments, MaxTotalTokens: c.MaxTotalTokens}).check(); e != nil {
		def := map[string]int{"segments": DefaultSegments, "max_segments": DefaultMaxSegments, "max_total_tokens": DefaultMaxTotalTokens}[e.Field]
		return status.FieldErrorf(status.InvalidArgument, "collect", e.Field, "%s (0 = %d)", e.Reason, def)
	}
	switch {
	case len(c.PromptTokens) == 0:
		return status.Errorf(status.InvalidArgument, "collect: prompt has no tokens; the policy needs a prefix to continue")
	case c.MaxRetries < 0:
		return status.Errorf(status.InvalidArgument, "collect: max_retries is %d, must be >= 0", c.MaxRetries)
	case c.PolicyTimeout < 0 || c.EnvTimeout < 0 || c.CriticTimeout < 0:
		return status.Errorf(status.InvalidArgument, "collect: timeouts must not be negative (policy %v, env %v, critic %v)", c.PolicyTimeout, c.EnvTimeout, c.CriticTimeout)
	}
	if t := c.Turns; t != nil {
		switch {
		case t.Parser == nil || t.Template == nil:
			return status.Errorf(status.InvalidArgument, "collect: the whole-turn context needs a parser and a chat template (parser set: %t, template set: %t)", t.Parser != nil, t.Template != nil)
		case t.Parser.Kind() != action.KindTool && t.Parser.Kind() != action.KindText:
			return status.Errorf(status.InvalidArgument, "collect: the whole-turn context parses replies into %q actions; expected a tool or text parser (exact token chunks need Segments)", t.Parser.Kind())
		case len(t.Messages) == 0:
			return status.Errorf(status.InvalidArgument, "collect: the whole-turn context needs the root messages the prompt was rendered from")
		case c.Codec == nil:
			return status.Errorf(status.InvalidArgument, "collect: the whole-turn context needs a codec to decode replies and encode tool messages")
		}
	}
	if err := c.Search.Validate(); err != nil {
		return err
	}
	if err := c.Reward.Validate(); err != nil {
		return err
	}
	p := c.Sampling
	p.MaxTokens = generate.Int(c.Segments)
	if _, err := p.Resolve(); err != nil {
		return status.Wrap(status.InvalidArgument, err, "collect: base sampling parameters")
	}
	return nil
}

// segmentRule names the rule that cuts the tree's edges (tree.Stats.SegmentRule), after
// defaults: "Segments(n)", or "Segments(n), whole turns" with Turns.
func (c Config) segmentRule() string {
	if c.Turns != nil {
		return fmt.Sprintf("Segments(%d), whole turns", c.Segments)
	}
	return fmt.Sprintf("Segments(%d)", c.Segments)
}

func (c Config) limits() search.Limits {
	return search.Limits{MaxTotalTokens: c.MaxTotalTokens, SegmentTokens: c.Segments}
}
