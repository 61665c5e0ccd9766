package collect

import (
	"sync/atomic"
	"time"
)

// Progress is a running collection's counters, updated by the engine with atomic adds
// (no lock on the rollout path) and readable at any time from any goroutine with
// Snapshot. A zero Progress is ready; give one to Run with WithProgress (one collection per
// Progress) and read it while the collection runs.
type Progress struct {
	budget   atomic.Int64
	launched atomic.Int64
	finished atomic.Int64
	failed   atomic.Int64
	segments atomic.Int64
	tokens   atomic.Int64
	began    atomic.Int64 // unix nanoseconds; 0: not started
	ended    atomic.Int64 // unix nanoseconds; 0: still running
}

// ProgressSnapshot is what Progress.Snapshot read. The counts only grow while the
// collection runs; when it has ended (Done), RolloutsFinished equals the tree's
// Stats.Rollouts and GeneratedTokens its Stats.GeneratedTokens.
type ProgressSnapshot struct {
	// Budget is the search budget B (rollouts per tree); 0 before the run starts.
	Budget int `json:"budget"`
	// RolloutsLaunched counts the budget units spent so far (rollouts started,
	// retries included).
	RolloutsLaunched int `json:"rollouts_launched"`
	// RolloutsFinished counts the rollouts whose outcome the tree keeps (a completed
	// path or a failed node; cancelled rollouts are not counted).
	RolloutsFinished int `json:"rollouts_finished"`
	// RolloutsFailed counts the finished rollouts that failed.
	RolloutsFailed int `json:"rollouts_failed"`
	// Segments counts the policy responses accepted (one per edge generated, also in
	// rollouts that failed later).
	Segments int `json:"segments"`
	// GeneratedTokens counts the tokens of those responses.
	GeneratedTokens int `json:"generated_tokens"`
	// ElapsedSeconds is the time since the run started (until it ended, once Done).
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// TokensPerSecond is GeneratedTokens / ElapsedSeconds (0 before any time passed).
	TokensPerSecond float64 `json:"tokens_per_second"`
	// ETASeconds estimates the time left at the pace so far: the unfinished budget
	// units times the mean time per finished rollout. Nil until a rollout finished,
	// and once Done (a tree may also stop early, with budget unspent).
	ETASeconds *float64 `json:"eta_seconds"`
	// Done reports that the collection has ended.
	Done bool `json:"done"`
}

// Snapshot reads the counters. Each is read atomically; a snapshot taken while
// rollouts finish may combine counts from slightly different instants.
func (p *Progress) Snapshot() ProgressSnapshot {
	s := ProgressSnapshot{
		Budget:           int(p.budget.Load()),
		RolloutsLaunched: int(p.launched.Load()),
		RolloutsFinished: int(p.finished.Load()),
		RolloutsFailed:   int(p.failed.Load()),
		Segments:         int(p.segments.Load()),
		GeneratedTokens:  int(p.tokens.Load()),
	}
	began, ended := p.began.Load(), p.ended.Load()
	if began == 0 {
		return s
	}
	now := time.Now().UnixNano()
	if ended != 0 {
		now, s.Done = ended, true
	}
	s.ElapsedSeconds = max(time.Duration(now-began).Seconds(), 0)
	if s.ElapsedSeconds > 0 {
		s.TokensPerSecond = float64(s.GeneratedTokens) / s.ElapsedSeconds
	}
	if !s.Done && s.RolloutsFinished > 0 {
		eta := float64(max(s.Budget-s.RolloutsFinished, 0)) * s.ElapsedSeconds / float64(s.RolloutsFinished)
		s.ETASeconds = &eta
	}
	return s
}

func (p *Progress) start(budget int) {
	p.budget.Store(int64(budget))
	p.began.Store(time.Now().UnixNano())
}

func (p *Progress) end() { p.ended.Store(time.Now().UnixNano()) }

// finishedRollout counts a rollout's outcome as its goroutine returns it, as insert
// will (a cancelled rollout is discarded, not counted).
func (p *Progress) finishedRollout(o *outcome) {
	if o.cancelled {
		return
	}
	p.finished.Add(1)
	if o.failure != "" {
		p.failed.Add(1)
	}
}
