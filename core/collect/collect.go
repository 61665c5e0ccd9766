package collect

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// Result is a collection's tree and every failure it met, in the order they
// were recorded (rollouts in launch order, then critic calls as they ran).
// The failures are listed whether or not AllowPartial is set.
type Result struct {
	Tree     *tree.Tree
	Failures []Failure
}

// engine is one collection's state. Only the coordinating goroutine (Run)
// touches the tree, snapshots and failures; rollout goroutines read their
// launch and the immutable settings and write only their own outcome and the
// atomic counters.
type engine struct {
	cfg          Config
	lim          search.Limits
	minRemaining int
	policy       Policy
	critic       Critic
	turns        *turnRenderer // nil: exact-token segments

	t        *tree.Tree
	snaps    []*snapshot // by node id; nil where none is kept
	scored   []bool      // by node id: the critic was asked (once) for it
	failures []Failure
	spent    int  // budget units launched
	silent   bool // a round's every rollout timed out waiting for the policy: no more rounds
	rollouts int  // budget units whose outcome is in the tree

	// base is the reset env a resumed collection replays kept checkpoints from
	// (WithResume); nil otherwise.
	base *snapshot
	from *tree.Tree // the tree WithResume continues; nil: a new tree

	prog *Progress // the live counters; its tokens are Stats.GeneratedTokens
	// stop cancels the collection's context when a generation was aborted and
	// StopOnAbort is set (nil otherwise); stopped records that it did.
	stop        context.CancelFunc
	stopped     atomic.Bool
	policyNanos atomic.Int64
	reused      int
	// tree is this collection's process-unique id, sent with every policy request
	// (generate.Request.Tree) so that a fleet can schedule and route by tree.
	tree uint64
}

// treeIDs numbers collections in this process (generate.Request.Tree); zero is never used.
var treeIDs atomic.Uint64

// Option is an optional setting of one Run.
type Option func(*options)

type options struct {
	progress *Progress
	resume   *tree.Tree
}

// WithProgress has Run count its work in p as it goes (one collection per Progress;
// read it with p.Snapshot from any goroutine while the collection runs). A nil p
// counts nothing the caller can read.
func WithProgress(p *Progress) Option {
	return func(o *options) { o.progress = p }
}

// Run collects one tree: it Resets env once, runs Search.Warmup rollouts from
// the root concurrently, then rounds of branches planned by search.Plan
// (each round's picks launched concurrently) until the budget is spent or
// the plan is empty. At most MaxRolloutsInFlight rollouts (fewer when the
// policy reports a smaller Capacity) run at once; each is set up when it
// starts, so memory follows the rollouts in flight and the tree collected so
// far, not the budget. Before each plan, the critic scores (in one batch) the
// candidate checkpoints it has not scored yet; after the last round it
// scores the checkpoints that became candidates since, and with Independent
// it scores every checkpoint. critic may be nil (no predictions).
//
// Node ids and child order follow launch order, never completion order: each
// rollout builds its nodes privately and the round inserts them in launch
// order after every rollout of the round has ended, so the same seed and a
// deterministic policy and env give a bit-identical tree.
//
// A rollout whose policy or env call fails (or whose env reward is not
// finite or outside [RewardMin, RewardMax]) becomes one failed node under
// its start checkpoint; its partial nodes are discarded and its budget unit
// is spent. A critic batch that fails leaves its checkpoints unscored. Both
// are listed in Result.Failures, and unless AllowPartial is set Run then
// returns a status.Collection error wrapping a *FailureError — together with
// the full Result, so nothing collected is lost.
//
// The env decides when a path ends: a finished chunk (EOS, also exactly at
// a segment boundary) ends it when the env's step says done, as MathEnv's
// does; an env that answers a finished chunk with an observation and not
// done continues the path after it. With Turns, every turn is stepped and a
// ToolEnv-like env says done on a turn without tool calls; a turn that
// continues gets the template's closing text, the observation messages and
// the next generation prompt as conditioning. A path still running at MaxTotalTokens
// generated tokens or MaxSegments edges ends truncated.
//
// Cancelling ctx stops every call in flight; Run waits for the rollouts to
// return (policies, envs and critics must honour their context), discards
// the unfinished ones and returns the tree so far with a status.Cancelled
// (or status.Timeout) error. Invalid configuration is status.InvalidArgument
// with a nil tree. Run closes every env fork it made before returning; env
// itself stays open.
//
// Run is the engine's one entry point: core/session wraps it in a lifecycle (start,
// cancel, wait, poll) for the C ABI and the load generator, and opts add what a caller
// may want to watch (WithProgress) and where to start from (WithResume: continue an
// aborted collection's partial tree).
func Run(ctx context.Context, cfg Config, policy Policy, env Env, critic Critic, opts ...Option) (Result, error) {
	began := time.Now()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	prog := o.progress
	if prog == nil {
		prog = new(Progress)
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if policy == nil || env == nil {
		return Result{}, status.Errorf(status.InvalidArgument, "collect: a collection needs a policy and an env (policy set: %t, env set: %t)", policy != nil, env != nil)
	}
	cfg = cfg.withDefaults()
	e := &engine{cfg: cfg, lim: cfg.limits(), policy: policy, critic: critic, prog: prog, tree: treeIDs.Add(1), from: o.resume}
	e.minRemaining = cfg.Search.MinRemainingTokens(e.lim)
	if cfg.Turns != nil {
		r, err := newTurnRenderer(cfg.Turns, cfg.Codec)
		if err != nil {
			return Result{}, err
		}
		e.turns = r
	}
	defer e.releaseAll()

	if cfg.StopOnAbort {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		e.stop = cancel
	}
	prog.start(cfg.Search.Budget)
	err := e.run(ctx, env)
	prog.end()
	st := &e.t.Stats
	st.Rollouts = e.rollouts
	st.BudgetUnspent = cfg.Search.Budget - e.spent
	st.GeneratedTokens = int(e.prog.tokens.Load())
	st.PrefixTokensReused = e.reused
	st.PolicySeconds = time.Duration(e.policyNanos.Load()).Seconds()
	st.WallSeconds = time.Since(began).Seconds()
	e.t.RecordOutcomes(cfg.Reward.RewardMax)
	res := Result{Tree: e.t, Failures: e.failures}
	if err != nil {
		return res, err
	}
	if len(e.failures) > 0 && !cfg.AllowPartial {
		return res, status.Wrap(status.Collection, &FailureError{ProblemID: cfg.ProblemID, Failures: e.failures}, "collect")
	}
	return res, nil
}

func (e *engine) run(ctx context.Context, env Env) error {
	cfg := &e.cfg
	prompt := tree.PackedSequence{
		Tokens:    append([]uint32(nil), cfg.PromptTokens...),
		Trainable: make([]bool, len(cfg.PromptTokens)),
		Logprobs:  make([]float64, len(cfg.PromptTokens)),
	}
	e.t = tree.New(cfg.ProblemID, prompt, cfg.PromptText)
	e.t.Stats.SegmentRule = cfg.segmentRule()
	e.snaps = []*snapshot{{env: env}}
	e.scored = []bool{false}

	ectx, cancel := withTimeout(ctx, cfg.EnvTimeout)
	obs, err := env.Reset(ectx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return e.cancelled(ctx)
		}
		return status.Wrap(status.CodeOf(err), err, "collect: env reset")
	}
	if !obs.Empty() {
		if e.turns != nil && obs.Tokens == nil {
			// The first turn's prompt was rendered from the root messages; text
			// after its generation prompt would bypass the template.
			return status.Errorf(status.InvalidArgument, "collect: env reset observation: the whole-turn context renders the first prompt from the root messages; put the reset observation there (or give exact tokens)")
		}
		tokens, text, err := e.observation(obs)
		if err != nil {
			return status.Wrap(status.InvalidArgument, err, "collect: env reset observation")
		}
		root := e.t.Root()
		root.Spans[0] = root.Spans[0].AppendConditioning(tree.PackedSequence{Tokens: tokens})
		root.Text += text
		root.Observation = text
	}

	next := resumed{warmup: cfg.Search.Warmup, firstRound: 1}
	if e.from != nil {
		if next, err = e.adopt(ctx, e.from, env); err != nil {
			return err
		}
	}
	// Warmup launches are built as they are admitted: a warmup of a million rollouts
	// holds only the ones in flight.
	warmup := func(j int) *launch {
		seed := search.WarmupSeed(cfg.Search.Seed, cfg.ProblemID, next.firstWarmup+j)
		return &launch{start: 0, pass: 0, seed: seed, base: seed}
	}
	if err := e.round(ctx, next.warmup, warmup); err != nil || e.silent {
		return err
	}
	if cfg.Search.Independent {
		return e.scoreCheckpoints(ctx, e.allCheckpoints())
	}
	for round := next.firstRound; e.spent < cfg.Search.Budget; round++ {
		cands := search.Candidates(e.t, cfg.Search, e.lim, nil)
		e.releaseExcept(cands)
		if err := e.scoreCheckpoints(ctx, cands); err != nil {
			return err
		}
		picks, err := search.Plan(e.t, cfg.Search, cfg.Reward, e.lim, round, cfg.Search.Budget-e.spent)
		if err != nil {
			return status.Wrap(status.CodeOf(err), err, "collect: plan round %d", round)
		}
		if len(picks) == 0 {
			return nil
		}
		branch := func(j int) *launch {
			seed := search.BranchSeed(cfg.Search.Seed, cfg.ProblemID, round, j)
			return &launch{start: picks[j].Node, pass: round, seed: seed, base: seed}
		}
		if err := e.round(ctx, len(picks), branch); err != nil || e.silent {
			return err
		}
	}
	return e.scoreCheckpoints(ctx, search.Candidates(e.t, cfg.Search, e.lim, nil))
}

// MaxRolloutsInFlight bounds the rollouts one collection runs at once. A round's
// rollouts are set up (their prefix copied, their env forked) only when they are
// admitted, so a collection's memory grows with the rollouts in flight and the tree
// collected so far, never with the budget or the warmup.
const MaxRolloutsInFlight = 4096

// capacityReporter is a Policy that says how many requests it serves at once (a fleet's
// Capacity); the engine runs no more rollouts at once than that.
type capacityReporter interface {
	Capacity() int
}

// inFlightLimit is how many rollouts of a round run at once: MaxRolloutsInFlight, or
// fewer when the policy reports a smaller capacity.
func (e *engine) inFlightLimit() int {
	if c, ok := e.policy.(capacityReporter); ok {
		if n := c.Capacity(); n > 0 {
			return min(n, MaxRolloutsInFlight)
		}
	}
	return MaxRolloutsInFlight
}

// round runs n launches (at(j) builds the j-th, in launch order) and inserts their
// outcomes in launch order, then retries failed ones (in launch order, while budget
// remains) the same way.
func (e *engine) round(ctx context.Context, n int, at func(j int) *launch) error {
	for n > 0 {
		if n > e.cfg.Search.Budget-e.spent {
			return status.Errorf(status.Internal, "collect: %d rollouts planned with %d budget units left", n, e.cfg.Search.Budget-e.spent)
		}
		retries, err := e.runLaunches(ctx, n, at)
		if err != nil || e.silent {
			return err
		}
		n, at = len(retries), func(j int) *launch { return retries[j] }
	}
	return nil
}

// finished is one rollout's outcome, by its index in the round.
type finished struct {
	j int
	o outcome
}

// runLaunches runs one pass of a round: at most inFlightLimit rollouts at once, each set
// up (restored, prepared) when it is admitted and inserted, in launch order, as soon as
// every launch before it is in. A launch is admitted only while it is within the
// in-flight limit of the oldest outcome not yet inserted, so the outcomes held back for
// order are bounded too. It returns the retries the failed launches earned.
func (e *engine) runLaunches(ctx context.Context, n int, at func(j int) *launch) ([]*launch, error) {
	limit := min(e.inFlightLimit(), n)
	roundEnd := e.spent + n // the budget spent once every launch of the pass ran
	done := make(chan finished, limit)
	held := make([]*outcome, limit) // outcomes waiting for an earlier one, by index mod limit
	ran := make([]*launch, limit)   // the admitted launches, by index mod limit
	var retries []*launch
	var failed error // stops admitting; the rollouts in flight are awaited and discarded
	silent := true
	next, admitted, inFlight := 0, 0, 0
	for next < n {
		// A first window that all timed out is the whole round's answer: admit no more
		// unless one of the rollouts still in flight answers.
		for failed == nil && !(silent && next >= limit) && admitted < n && admitted < next+limit && ctx.Err() == nil {
			l := at(admitted)
			if e.base != nil {
				if err := e.restore(ctx, l.start); err != nil {
					failed = err
					break
				}
			}
			if err := e.prepareLaunch(l); err != nil {
				failed = err
				break
			}
			e.spent++
			e.prog.launched.Add(1)
			ran[admitted%limit] = l
			go e.runOne(ctx, admitted, l, done)
			admitted++
			inFlight++
		}
		if inFlight == 0 {
			break // every admitted rollout is in and no more is admitted
		}
		f := <-done
		inFlight--
		held[f.j%limit] = &f.o
		for next < admitted && held[next%limit] != nil {
			o, l := held[next%limit], ran[next%limit]
			held[next%limit], ran[next%limit] = nil, nil
			next++
			if failed != nil {
				o.discard()
				continue
			}
			if p := o.panicked; p != "" {
				o.discard()
				failed = status.Errorf(status.Internal, "collect: panic in a rollout from node %d: %s", l.start, p)
				continue
			}
			// A round whose every rollout timed out waiting for the policy (a server that
			// accepts and never answers) ends the tree: each further round would cost
			// another full timeout for nothing. Its budget stays unspent.
			silent = silent && (o.timedOut || o.cancelled)
			if o.cancelled {
				o.discard()
				continue
			}
			if err := e.insert(l, o); err != nil {
				failed = err
				continue
			}
			if o.failure != "" && l.attempt < e.cfg.MaxRetries && roundEnd+len(retries) < e.cfg.Search.Budget {
				a := l.attempt + 1
				retries = append(retries, &launch{start: l.start, pass: l.pass, seed: retrySeed(l.base, e.cfg.ProblemID, a), attempt: a, base: l.base})
			}
		}
	}
	if failed != nil {
		return nil, failed
	}
	if ctx.Err() != nil {
		return nil, e.cancelled(ctx)
	}
	if silent {
		e.silent = true
		return nil, nil
	}
	return retries, nil
}

// runOne runs one admitted rollout and sends its outcome.
func (e *engine) runOne(ctx context.Context, j int, l *launch, done chan<- finished) {
	var o outcome
	defer func() { done <- finished{j: j, o: o} }()
	// A panic here would kill the process (the C boundary only recovers its own
	// goroutine): make it the round's error.
	defer func() {
		if r := recover(); r != nil {
			o = outcome{panicked: fmt.Sprintf("%v\n%s", r, debug.Stack())}
		}
	}()
	o = e.rollout(ctx, l)
	if o.aborted && e.stop != nil {
		// The first aborted generation ends the collection: cancel the siblings'
		// calls in flight now, not when they finish.
		e.stopped.Store(true)
		e.stop()
	}
	e.prog.finishedRollout(&o)
}

// prepareLaunch reads what a rollout needs off the tree and counts the
// prefix reuse of a branch (ALGORITHM.md §6.3).
func (e *engine) prepareLaunch(l *launch) error {
	nd := e.t.Node(l.start)
	if nd == nil || nd.Terminal() || nd.Failed != "" {
		return status.Errorf(status.Internal, "collect: cannot start a rollout at node %d: not an open checkpoint", l.start)
	}
	snap := e.snaps[l.start]
	if snap == nil || snap.closed {
		return status.Errorf(status.Internal, "collect: node %d has no env snapshot to branch from", l.start)
	}
	l.snap = snap
	l.depth = nd.Depth
	l.generated = e.t.PathGeneratedTokens(l.start)
	// Room for a few segments more, so most rollouts never copy the prefix.
	room := min(e.cfg.MaxTotalTokens-l.generated, 4*e.cfg.Segments)
	l.prefix = e.t.AppendContextTokens(make([]uint32, 0, e.t.ContextLen(l.start)+room), l.start)
	if l.pass > 0 {
		e.reused += l.generated
	}
	return nil
}

// insert adds an outcome's nodes (or its failed node) under the launch's
// checkpoint.
func (e *engine) insert(l *launch, o *outcome) error {
	e.rollouts++
	if o.failure != "" {
		id, err := e.addChild(l.start, tree.Node{Spans: []tree.PackedSequence{}, Failed: o.failure, SearchPass: l.pass}, nil)
		if err != nil {
			return err
		}
		e.failures = append(e.failures, Failure{NodeID: id, Message: o.failure, Aborted: o.aborted})
		return nil
	}
	parent := l.start
	for i := range o.nodes {
		id, err := e.addChild(parent, o.nodes[i], o.snaps[i])
		if err != nil {
			o.discard()
			return err
		}
		o.snaps[i] = nil // now owned by the tree
		parent = id
	}
	return nil
}

func (e *engine) addChild(parent int, nd tree.Node, snap *snapshot) (int, error) {
	id, err := e.t.AddChild(parent, nd)
	if err != nil {
		if snap != nil {
			snap.release()
		}
		return -1, status.Wrap(status.Internal, err, "collect: insert a rollout node")
	}
	e.snaps = append(e.snaps, snap)
	e.scored = append(e.scored, false)
	return id, nil
}

// allCheckpoints lists every completed nonterminal node (Independent's
// scoring set).
func (e *engine) allCheckpoints() []int {
	var ids []int
	excluded := e.t.Excluded(nil)
	for id := range e.t.Nodes {
		nd := &e.t.Nodes[id]
		if !excluded[id] && !nd.Terminal() {
			ids = append(ids, id)
		}
	}
	return ids
}

// scoreCheckpoints asks the critic, in one batch, for the listed nodes it
// has not been asked about yet.
func (e *engine) scoreCheckpoints(ctx context.Context, ids []int) error {
	if e.critic == nil {
		return nil
	}
	var batch []int
	for _, id := range ids {
		if !e.scored[id] {
			e.scored[id] = true
			batch = append(batch, id)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	contexts := make([]string, len(batch))
	for i, id := range batch {
		contexts[i] = e.t.ContextText(id)
	}
	cctx, cancel := withTimeout(ctx, e.cfg.CriticTimeout)
	values, err := e.critic.Score(cctx, contexts)
	cancel()
	if err == nil {
		err = CheckCriticValues(values, len(batch))
	}
	if err != nil {
		if ctx.Err() != nil {
			return e.cancelled(ctx)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "critic: ") { // the critics' own errors name themselves
			msg = "critic: " + msg
		}
		for _, id := range batch {
			e.failures = append(e.failures, Failure{NodeID: id, Message: msg})
		}
		return nil
	}
	for i, id := range batch {
		v := values[i]
		e.t.Nodes[id].Critic = &v
	}
	return nil
}

func (e *engine) cancelled(ctx context.Context) error {
	if e.stopped.Load() {
		return status.Wrap(status.Collection, &FailureError{ProblemID: e.cfg.ProblemID, Failures: e.failures},
			"collect: a generation was aborted (stop_on_abort) after %d of %d rollouts", e.rollouts, e.cfg.Search.Budget)
	}
	return status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "collect: problem %q stopped after %d of %d rollouts", e.cfg.ProblemID, e.rollouts, e.cfg.Search.Budget)
}

// releaseExcept releases the snapshots of checkpoints that left the
// candidate set: C only shrinks for a node (children accumulate, tokens and
// terminal states never change), so none of them is branched from again.
func (e *engine) releaseExcept(cands []int) {
	keep := 0
	for id, s := range e.snaps {
		if keep < len(cands) && cands[keep] == id {
			keep++
			continue
		}
		if s != nil {
			s.release()
			e.snaps[id] = nil
		}
	}
}

func (e *engine) releaseAll() {
	for id, s := range e.snaps {
		if s != nil {
			s.release()
			e.snaps[id] = nil
		}
	}
}
