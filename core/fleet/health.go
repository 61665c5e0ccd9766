package fleet

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// A replica's health comes from what it answers, not only from whether it can be reached:
// one that cannot be reached (or answers 5xx) goes down at once; one whose answers are
// broken (a request past its deadline, a body that cannot be read, an empty completion,
// a completion without a single logprob, an aborted request, or a malformed answer: a
// "stop" with no tokens, or a token id outside the vocabulary) goes down after
// DefaultUnhealthyAfter such answers in a row. A replica that goes down gets no request
// for the cooldown, doubled each time it goes down again (up to maxBackoff times), then one
// probe request at a time until an answer is good; its trees move to the replicas that
// are up.
//
// Every broken answer fails its request over to another replica. A malformed one is never
// returned: the last replica's becomes a status.Backend error naming it and what it
// answered. The last replica's abort is returned as an abort (a collection's
// stop_on_abort sees it).
//
// A server that samples end-of-sequence as its first token still returns that token:
// SGLang appends each sampled id to output_ids before its stop check (finish_reason
// {"type": "stop", "matched": <the EOS id>}, completion_tokens 1), and vLLM keeps a stop
// token in the completion's token_ids. So a "stop" with no tokens is not a model that
// chose to say nothing; it is a malformed answer.

const (
	// DefaultUnhealthyAfter is how many broken answers in a row take a replica down.
	DefaultUnhealthyAfter = 3
	// maxBackoff caps the cooldown's growth: a replica down again and again waits at most
	// this many cooldowns.
	maxBackoff = 32
)

// verdict is what one answer says about the replica that gave it.
type verdict int

const (
	healthy verdict = iota // a good answer
	neutral                // says nothing about the replica: the caller cancelled, or the request was wrong (4xx)
	broken                 // the replica answered, but not usefully
	gone                   // the replica could not be reached or answered 5xx
	refused                // the replica serves another model (identity.go)
)

// judge classifies one answer of a replica; malformed, when not "", says what was wrong
// with an answer that must not be used (vocab > 0: the vocabulary size).
func judge(ctx context.Context, res *generate.Result, err error, vocab int) (v verdict, malformed string) {
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return neutral, ""
		case isRefusal(err):
			return refused, ""
		case unreachable(err):
			return gone, ""
		}
		switch status.CodeOf(err) {
		case status.Timeout, status.Backend:
			return broken, ""
		}
		return neutral, ""
	}
	if res == nil {
		return broken, "no result"
	}
	if vocab > 0 {
		for k, id := range res.Tokens {
			if int64(id) >= int64(vocab) {
				return broken, fmt.Sprintf("token id %d (generated token %d of %d), outside the vocabulary of %d ids (0 to %d)",
					id, k+1, len(res.Tokens), vocab, vocab-1)
			}
		}
	}
	switch {
	case len(res.Tokens) == 0 && res.StopReason == generate.StopReasonStop:
		// A server returns the end-of-sequence id it stopped at (see above).
		return broken, `finish reason "stop" with no tokens (a server that stops at its first token returns that token)`
	case res.StopReason == generate.StopReasonAbort:
		if ctx.Err() != nil {
			return neutral, "" // the caller's own abort
		}
		return broken, ""
	case len(res.Tokens) == 0 && res.StopReason == generate.StopReasonLength:
		return broken, "" // an empty completion that says it hit its length
	}
	if len(res.Tokens) > 0 && len(res.Logprobs) == len(res.Tokens) {
		for _, lp := range res.Logprobs {
			if !math.IsNaN(lp) {
				return healthy, ""
			}
		}
		return broken, "" // not one logprob: nothing of it can train
	}
	return healthy, ""
}

// health is a replica's state as its answers left it.
type health struct {
	strikes   int       // broken answers in a row
	backoff   int       // the next cooldown, in cooldowns (1 after a good answer)
	probation bool      // came back from down: one request at a time until one is good
	downUntil time.Time // no request before then
	downs     int64     // times it went down
}

// record updates the health with one answer's verdict; it reports whether the replica
// went down now.
func (h *health) record(v verdict, cooldown time.Duration, after int) bool {
	switch v {
	case healthy:
		h.strikes, h.backoff, h.probation = 0, 1, false
	case broken:
		h.strikes++
		if h.probation || h.strikes >= after {
			h.down(cooldown)
			return true
		}
	case gone:
		h.down(cooldown)
		return true
	}
	return false
}

func (h *health) down(cooldown time.Duration) {
	h.backoff = max(h.backoff, 1)
	h.downUntil = time.Now().Add(cooldown * time.Duration(h.backoff))
	h.backoff = min(2*h.backoff, maxBackoff)
	h.strikes, h.probation = 0, true
	h.downs++
}

// up reports whether the replica may take a request now: its cooldown is over, and on
// probation it has none in flight (the probe).
func (h *health) up(now time.Time, inFlight int) bool {
	return !now.Before(h.downUntil) && (!h.probation || inFlight == 0)
}

// isDown reports whether the replica is down or has not yet answered well since.
func (h *health) isDown(now time.Time) bool { return now.Before(h.downUntil) || h.probation }
