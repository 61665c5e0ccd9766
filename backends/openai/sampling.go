package openai

import (
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// sampling is what both APIs take from generate.SamplingParams. A field left nil is left out
// of the request, so the API's own default applies (reasoning models reject a temperature).
type sampling struct {
	temperature, topP *float64
	maxTokens         *int
	stop              []string
	seed              *int64
	logprobs          *int
}

// toSampling checks p's ranges and refuses the fields these APIs do not have, naming them,
// rather than silently dropping a setting the caller relies on.
func toSampling(api API, p generate.SamplingParams) (sampling, error) {
	if _, err := p.Resolve(); err != nil {
		return sampling{}, status.Wrap(status.InvalidArgument, err, "%s", Name)
	}
	unsupported := func(field string) error {
		return status.Errorf(status.InvalidArgument, "%s %s: sampling field %s is not supported by this API; leave it None", Name, api, field)
	}
	switch {
	case p.TopK != nil && *p.TopK > 0:
		return sampling{}, unsupported("top_k")
	case p.RepetitionPenalty != nil && *p.RepetitionPenalty != 1:
		return sampling{}, unsupported("repetition_penalty")
	case p.PromptLogprobs != nil:
		return sampling{}, unsupported("prompt_logprobs")
	case len(p.StopTokenIDs) > 0:
		return sampling{}, unsupported("stop_token_ids")
	case api == Responses && len(p.Stop) > 0:
		return sampling{}, unsupported("stop")
	case api == Responses && p.Seed != nil:
		return sampling{}, unsupported("seed")
	case p.Logprobs != nil && *p.Logprobs > 20:
		return sampling{}, status.Errorf(status.InvalidArgument, "%s: logprobs %d: the API returns at most 20 alternatives per token", Name, *p.Logprobs)
	}
	return sampling{temperature: p.Temperature, topP: p.TopP, maxTokens: p.MaxTokens, stop: p.Stop, seed: p.Seed, logprobs: p.Logprobs}, nil
}
