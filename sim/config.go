package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/focus-go/focus-go/core/status"
)

// Config is everything Start needs. Its zero value is a sensible server: a generated
// tokenizer in a temporary directory, seed 0, no latency, no faults. It decodes from JSON
// (the C ABI and the Python wrapper pass it that way); durations are seconds as a number or
// Go duration strings such as "5ms".
type Config struct {
	// Seed drives every request that carries no seed of its own (seed + request counter),
	// and the fault dice.
	Seed int64 `json:"seed"`
	// ModelDir is where the generated tokenizer.json, tokenizer_config.json and config.json
	// are written. Empty: a temporary directory shared by the simulators of this process
	// (replicas of one model serve one path), removed when the last of them closes. A
	// configured directory is left in place.
	ModelDir string `json:"model_dir"`
	// TokenizerDir serves an existing byte-level BPE tokenizer (e.g. a Qwen3 checkpoint
	// directory) instead of the generated one; ModelDir is then ignored and nothing is
	// written. The language model writes the same text and encodes it with that vocabulary.
	TokenizerDir string `json:"tokenizer_dir"`
	// ModelName is the served model name (vLLM's --served-model-name). Empty: the model
	// directory path, as vLLM does for `--model /path`.
	ModelName string `json:"model_name"`
	// MaxModelLen is the context window (prompt + output tokens). Zero: 32768.
	MaxModelLen int `json:"max_model_len"`
	// VLLMVersion selects the vLLM behaviour profile reported by GET /version: the error
	// envelope (flat before 0.10.1, nested after), return_tokens_as_token_ids as a request
	// field (0.8.0+), return_token_ids (0.10.2+) and the context-length message. Zero: "0.10.2".
	VLLMVersion string `json:"vllm_version"`
	// SGLangVersion is reported by /get_server_info. Zero: "0.5.2".
	SGLangVersion string `json:"sglang_version"`
	// ReturnTokensAsTokenIDs is vLLM's server flag --return-tokens-as-token-ids.
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
	// Think makes every solution open with a short <think>...</think> block.
	Think bool `json:"think"`
	// Verbosity makes solutions as long as a reasoning model's (0 to MaxVerbosity; zero:
	// the terse script, about 100 tokens). 1 restates the problem, announces each step and
	// summarises; 2 adds long arithmetic (multi-digit operands split by place value, one
	// line per partial result, each a place to slip) and a double-check after every step;
	// 3 adds explanations and an independent verification of the answer. Use 3 with
	// 256-token segments: with the generated tokenizer, solutions of bundled problems run
	// about 750-1100 tokens there (the four-step averages about 1650; with a Qwen3
	// tokenizer about 450-1100) and can slip, or catch a slip, anywhere along the way.
	Verbosity int `json:"verbosity"`
	// LogprobMode is "processed" (default): the log-probability under the distribution the
	// token was actually drawn from (temperature, then top-k, top-p and min-p, renormalised);
	// or "raw": under the model distribution before any of them (vLLM V1's default).
	// At temperature 0 both report the raw value.
	LogprobMode string `json:"logprob_mode"`
	// Latency is the timing model; its zero value answers at once.
	Latency Latency `json:"latency"`
	// Cache is the prefix (radix) cache behind cached_tokens.
	Cache Cache `json:"cache"`
	// Warmup makes /health (and generation) answer 503 for this long after Start, like a
	// server still loading its weights.
	Warmup Duration `json:"warmup"`
	// Faults are the fault rules active from the start; Server.SetFaults replaces them.
	Faults []Fault `json:"faults"`
	// ToolCallErrorRate is the probability that a tool call the model writes has malformed
	// JSON arguments (a missing closing brace), as real models sometimes do.
	ToolCallErrorRate float64 `json:"tool_call_error_rate"`
}

// Latency is the timing model of one sequence: it waits for a free slot (at most
// MaxConcurrent sequences run at once; the rest queue), then FirstToken +
// PrefillPerToken × uncached prompt tokens, then PerToken for every output token.
type Latency struct {
	FirstToken      Duration `json:"first_token"`
	PrefillPerToken Duration `json:"prefill_per_token"`
	PerToken        Duration `json:"per_token"`
	// MaxConcurrent bounds running sequences; zero means unbounded.
	MaxConcurrent int `json:"max_concurrent"`
	// MaxQueued bounds sequences waiting for a slot; past it the request is refused with
	// 503 "The request queue is full." (SGLang --max-queued-requests). Zero: unbounded.
	MaxQueued int `json:"max_queued"`
}

// Cache configures the prefix cache. cached_tokens is the longest prefix of the prompt
// that an earlier sequence (prompt + output) shared, capped at prompt length − 1 because a
// server always recomputes the last prompt position. The vLLM endpoint reports whole
// BlockSize-token blocks only, as vLLM's automatic prefix caching does.
type Cache struct {
	Disabled bool `json:"disabled"`
	// Tokens is the capacity in cached tokens; least-recently-used leaves are evicted past
	// it. Zero: 1,000,000.
	Tokens int `json:"tokens"`
	// BlockSize is vLLM's KV block size. Zero: 16.
	BlockSize int `json:"block_size"`
	// InsertOnPrefill stores a sequence's prompt when the sequence starts (its prefill), as
	// SGLang's radix cache holds a running request's prefix, so that requests sharing a
	// prompt that run at the same time compute it once; the output is stored when the
	// sequence ends either way. Off: the whole sequence is stored when it ends.
	InsertOnPrefill bool `json:"insert_on_prefill"`
}

// Duration is a time.Duration that JSON-decodes from seconds (a number) or a Go duration
// string, and encodes as seconds.
type Duration time.Duration

// D is the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(d).Seconds(), 'g', -1, 64), nil
}

// UnmarshalJSON reads seconds (number), a Go duration string, or null.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		*d = 0
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return status.Errorf(status.InvalidArgument, "sim: duration %s is not a JSON string", s)
		}
		v, err := time.ParseDuration(u)
		if err != nil {
			return status.Errorf(status.InvalidArgument, "sim: duration %q: want seconds or a Go duration like \"5ms\"", u)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return status.Errorf(status.InvalidArgument, "sim: duration %s: want non-negative seconds or a Go duration string", s)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// withDefaults fills the zero values and validates the rest.
func (c Config) withDefaults() (Config, error) {
	if c.MaxModelLen == 0 {
		c.MaxModelLen = 32768
	}
	if c.MaxModelLen < 16 {
		return c, status.Errorf(status.InvalidArgument, "sim: max_model_len %d: want at least 16", c.MaxModelLen)
	}
	if c.VLLMVersion == "" {
		c.VLLMVersion = "0.10.2"
	}
	if _, ok := parseVersion(c.VLLMVersion); !ok {
		return c, status.Errorf(status.InvalidArgument, "sim: vllm_version %q: want a version like \"0.10.2\"", c.VLLMVersion)
	}
	if c.SGLangVersion == "" {
		c.SGLangVersion = "0.5.2"
	}
	switch c.LogprobMode {
	case "":
		c.LogprobMode = "processed"
	case "processed", "raw":
	default:
		return c, status.Errorf(status.InvalidArgument, "sim: logprob_mode %q: want \"processed\" or \"raw\"", c.LogprobMode)
	}
	if c.Cache.Tokens == 0 {
		c.Cache.Tokens = 1_000_000
	}
	if c.Cache.BlockSize == 0 {
		c.Cache.BlockSize = 16
	}
	if c.Cache.Tokens < 0 || c.Cache.BlockSize < 0 {
		return c, status.Errorf(status.InvalidArgument, "sim: cache tokens %d and block_size %d must not be negative", c.Cache.Tokens, c.Cache.BlockSize)
	}
	l := c.Latency
	if l.FirstToken < 0 || l.PrefillPerToken < 0 || l.PerToken < 0 || l.MaxConcurrent < 0 || l.MaxQueued < 0 || c.Warmup < 0 {
		return c, status.Errorf(status.InvalidArgument, "sim: latency values and warmup must not be negative: %+v, warmup %v", l, c.Warmup.D())
	}
	if c.Verbosity < 0 || c.Verbosity > MaxVerbosity {
		return c, status.Errorf(status.InvalidArgument, "sim: verbosity %d: want 0 (terse) to %d", c.Verbosity, MaxVerbosity)
	}
	if c.ToolCallErrorRate < 0 || c.ToolCallErrorRate > 1 {
		return c, status.Errorf(status.InvalidArgument, "sim: tool_call_error_rate %v: want a probability in [0, 1]", c.ToolCallErrorRate)
	}
	for i, f := range c.Faults {
		if err := f.validate(); err != nil {
			return c, status.Wrap(status.InvalidArgument, err, "sim: faults[%d]", i)
		}
	}
	return c, nil
}

// parseVersion reads "major.minor.patch" (extra suffixes such as "rc1" or "+cu128" ignored).
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return out, false
	}
	for i, p := range parts {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		if end == 0 {
			return out, false
		}
		n, _ := strconv.Atoi(p[:end])
		out[i] = n
	}
	return out, true
}

// versionAtLeast compares a parsed version with major.minor.patch.
func versionAtLeast(v [3]int, major, minor, patch int) bool {
	want := [3]int{major, minor, patch}
	for i := range v {
		if v[i] != want[i] {
			return v[i] > want[i]
		}
	}
	return true
}
