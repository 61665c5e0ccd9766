package sglang

import (
	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// newRequest is the /generate body for req with its resolved parameters p. Generate sends
// it; RequestBody hands it to callers that own the transport (Slime's post function).
func newRequest(req generate.Request, p generate.Resolved) *request {
	rid := req.ID
	if rid == "" {
		rid = NewRequestID()
	}
	body := &request{
		RID: rid, InputIDs: req.Tokens, ReturnLogprob: true, LogprobStartLen: -1,
		TopLogprobsNum: p.TopLogprobs,
		SamplingParams: sampling{
			MaxNewTokens: p.MaxTokens, Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK,
			Stop: p.Stop, StopTokenIDs: p.StopTokenIDs, NoStopTrim: true,
			RepetitionPenalty: p.RepetitionPenalty, N: 1,
		},
	}
	if p.TopK == 0 {
		body.SamplingParams.TopK = -1 // SGLang's "off" is -1 only
	}
	if p.HasSeed {
		seed := p.Seed
		body.SamplingParams.SamplingSeed = &seed
	}
	if p.PromptLogprobs >= 0 {
		// 0 = logprobs from the first prompt token on; SGLang has one top-N for both.
		body.LogprobStartLen = 0
		body.TopLogprobsNum = max(p.TopLogprobs, p.PromptLogprobs)
	}
	return body
}

// RequestBody is the JSON /generate body Generate would send for req (defaults applied,
// every sampling field explicit, return_logprob true), for a caller that sends it through
// its own transport, such as Slime's http_utils.post to its SGLang router. Feed the reply to
// ParseResponse with the same req.
func RequestBody(req generate.Request) ([]byte, error) {
	p, err := req.Params.Resolve()
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "%s", Name)
	}
	if len(req.Tokens) == 0 {
		return nil, status.Errorf(status.InvalidArgument, "%s: prompt has no tokens; /generate needs at least one input id", Name)
	}
	b, err := transport.JSON.Marshal(newRequest(req, p))
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "%s: encoding the request", Name)
	}
	return b, nil
}

// ParseResponse reads a /generate reply to req exactly as Generate does: token ids from
// meta_info.output_token_logprobs, the finish reason, and the checks of Result.Validate
// (at most max_tokens tokens, one finite logprob per token). Every failure is status.Backend,
// except bad sampling parameters (InvalidArgument).
func ParseResponse(body []byte, req generate.Request) (*generate.Result, error) {
	p, err := req.Params.Resolve()
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "%s", Name)
	}
	res, err := parseResponse(body, req.Tokens, p, req.SkipText)
	if err != nil {
		return nil, err
	}
	if err := res.Validate(Name, p.MaxTokens); err != nil {
		return nil, err
	}
	return res, nil
}
