package session

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"
	"time"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/bridge"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/mathenv"
	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/tree"
)

// Spec is one collection as data. Its JSON is the Config's (see collect.Config's
// UnmarshalJSON) with, beside it, "codec", "policy", "env", "critic" and "turn".
type Spec struct {
	// Config is the collection's settings; Codec and Turns are filled from the
	// fields below when they are set.
	Config collect.Config
	// Codec names the chat codec (the C ABI's codec handle; 0 = none): it decodes for
	// MathEnv and the node text, encodes observations, and renders whole turns.
	Codec uint64
	// Policy is "native" (Handle, through the Resolver) or "remote" (Object).
	Policy Part
	// Env is "math" (the built-in MathEnv grading against Label) or "remote" (Object).
	Env Part
	// Critic is "constant" (Value), "http" (URL, Timeout) or "remote" (Object); nil
	// means no critic.
	Critic *Part
	// Turn, when set, selects the whole-turn chat context; nil means exact-token
	// segments.
	Turn *Turn
	// Resume, when set, is an earlier partial tree of the problem that the collection
	// continues (collect.WithResume); nil starts a new tree.
	Resume *tree.Tree
}

// Part names one collaborator: a Go-native implementation or a remote Python object.
type Part struct {
	Kind    string  `json:"kind"`
	Handle  uint64  `json:"handle"`  // native policy
	Object  int64   `json:"object"`  // remote: the Python object's id in its registry
	Label   string  `json:"label"`   // math: the reference answer
	Value   float64 `json:"value"`   // constant critic
	URL     string  `json:"url"`     // http critic
	Timeout float64 `json:"timeout"` // http critic, seconds (0 = none)
}

// Turn is the whole-turn context: the parser profile, the root messages and tool
// schemas the prompt was rendered from, and the chat template keyword arguments.
type Turn struct {
	Parser         string                     `json:"parser"`
	Messages       []json.RawMessage          `json:"messages"`
	Tools          json.RawMessage            `json:"tools"`
	TemplateKwargs map[string]json.RawMessage `json:"template_kwargs"`
}

// UnmarshalJSON reads the Config from the same object as the parts; "resume", when
// not null, is a tree in its JSON form (tree.Unmarshal).
func (s *Spec) UnmarshalJSON(data []byte) error {
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &s.Config); err != nil {
		return err
	}
	parts := struct {
		Codec  *uint64         `json:"codec"`
		Policy *Part           `json:"policy"`
		Env    *Part           `json:"env"`
		Critic *Part           `json:"critic"`
		Turn   *Turn           `json:"turn"`
		Resume json.RawMessage `json:"resume"`
	}{Codec: &s.Codec, Policy: &s.Policy, Env: &s.Env, Critic: s.Critic, Turn: s.Turn}
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &parts); err != nil {
		return err
	}
	s.Critic, s.Turn = parts.Critic, parts.Turn
	if raw := bytes.TrimSpace(parts.Resume); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		t, err := tree.Unmarshal(raw)
		if err != nil {
			return status.Wrap(status.InvalidArgument, err, "resume")
		}
		s.Resume = t
	}
	return nil
}

// Resolver supplies the parts whose implementations live outside core.
type Resolver interface {
	// Policy is the Go-native policy a "native" part's handle names.
	Policy(handle uint64) (collect.Policy, error)
	// Codec is the tokenizer of the chat codec a Spec's Codec names.
	Codec(handle uint64) (collect.Codec, error)
	// HTTPCritic opens the value server of an "http" critic part; the session calls
	// release once when it ends.
	HTTPCritic(url string, timeout time.Duration) (critic collect.Critic, release func(), err error)
	// Turns builds the whole-turn context of turn with the chat template of the codec
	// handle codec.
	Turns(codec uint64, turn Turn) (*collect.Turns, error)
}

// Outcome is a finished collection: the tree and failures collect.Run returned, and
// its error (nil: complete; see collect.Run for what a non-nil error keeps).
type Outcome struct {
	collect.Result
	Err error
}

type phase int

const (
	built phase = iota
	running
	ended // done is closed
)

// Session is one collection from its Spec to its Outcome.
type Session struct {
	cfg    collect.Config
	policy collect.Policy
	env    collect.Env
	critic collect.Critic
	bridge *bridge.Bridge
	// release frees what New opened (an HTTP critic); nil when nothing.
	release func()
	resume  *tree.Tree // Spec.Resume
	// progress counts the running collection's work (collect.WithProgress).
	progress collect.Progress

	mu     sync.Mutex
	phase  phase
	cancel context.CancelFunc // set by Start
	taken  bool
	closed bool
	done   chan struct{}
	out    Outcome // written before done is closed

	closeOnce sync.Once
}

// New validates spec and builds its parts; nothing runs until Start. r may be nil when
// the spec names no native part. Every error is a status error naming what was wrong;
// on error nothing stays open.
func New(spec Spec, r Resolver) (*Session, error) {
	cfg := spec.Config
	if spec.Codec != 0 {
		if r == nil {
			return nil, noResolver("the codec")
		}
		codec, err := r.Codec(spec.Codec)
		if err != nil {
			return nil, err
		}
		cfg.Codec = codec
	}
	if spec.Turn != nil {
		if spec.Codec == 0 {
			return nil, status.Errorf(status.InvalidArgument, "collect: the whole-turn context needs a codec (a focus-go tokenizer) to render tool messages")
		}
		turns, err := r.Turns(spec.Codec, *spec.Turn)
		if err != nil {
			return nil, err
		}
		cfg.Turns = turns
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, resume: spec.Resume, bridge: bridge.New(), done: make(chan struct{})}
	if err := s.parts(spec, r); err != nil {
		s.bridge.Close()
		if s.release != nil {
			s.release()
		}
		return nil, err
	}
	return s, nil
}

func noResolver(what string) error {
	return status.Errorf(status.InvalidArgument, "collect: %s needs a resolver, and none was given", what)
}

func (s *Session) parts(spec Spec, r Resolver) error {
	switch spec.Policy.Kind {
	case "native":
		if r == nil {
			return noResolver("a native policy")
		}
		p, err := r.Policy(spec.Policy.Handle)
		if err != nil {
			return err
		}
		s.policy = p
	case "remote":
		s.policy = bridge.Policy{Bridge: s.bridge, Object: spec.Policy.Object}
	default:
		return status.Errorf(status.InvalidArgument, "collect: unknown policy kind %q, expected native or remote", spec.Policy.Kind)
	}

	switch spec.Env.Kind {
	case "math":
		codec := s.cfg.Codec
		if codec == nil {
			return status.Errorf(status.InvalidArgument, "collect: the native MathEnv needs a codec to decode responses")
		}
		s.env = mathenv.New(spec.Env.Label, func(ids []uint32) (string, error) { return codec.Decode(ids, false) })
	case "remote":
		s.env = bridge.Env{Bridge: s.bridge, Object: spec.Env.Object}
	default:
		return status.Errorf(status.InvalidArgument, "collect: unknown env kind %q, expected math or remote", spec.Env.Kind)
	}

	if c := spec.Critic; c != nil {
		switch c.Kind {
		case "constant":
			s.critic = collect.ConstantCritic{Value: c.Value}
		case "http":
			if r == nil {
				return noResolver("an http critic")
			}
			critic, release, err := r.HTTPCritic(c.URL, collect.Seconds(c.Timeout))
			if err != nil {
				return err
			}
			s.critic, s.release = critic, release
		case "remote":
			s.critic = bridge.Critic{Bridge: s.bridge, Object: c.Object}
		default:
			return status.Errorf(status.InvalidArgument, "collect: unknown critic kind %q, expected constant, http or remote", c.Kind)
		}
	}
	return nil
}

// Start builds spec's session (New) and starts it.
func Start(ctx context.Context, spec Spec, r Resolver) (*Session, error) {
	s, err := New(spec, r)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Start runs the collection in a goroutine, under a context derived from ctx. A
// session starts once; one cancelled or closed before it started does not start and
// reports status.Cancelled.
func (s *Session) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.cancel != nil: // set by the first Start, running or ended since
		return status.Errorf(status.InvalidArgument, "collection: already started")
	case s.closed:
		return status.Errorf(status.Cancelled, "collection: closed before it started")
	case s.phase == ended:
		return status.Errorf(status.Cancelled, "collection: cancelled before it started")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.phase = running
	go s.run(ctx)
	return nil
}

func (s *Session) run(ctx context.Context) {
	var out Outcome
	defer func() {
		if r := recover(); r != nil {
			out.Err = status.Errorf(status.Internal, "collect: internal error (Go panic: %v)\n%s", r, debug.Stack())
		}
		s.bridge.Close() // pollers learn that no more requests will come
		s.mu.Lock()
		s.out, s.phase = out, ended
		s.mu.Unlock()
		close(s.done)
	}()
	opts := []collect.Option{collect.WithProgress(&s.progress)}
	if s.resume != nil {
		opts = append(opts, collect.WithResume(s.resume))
	}
	out.Result, out.Err = collect.Run(ctx, s.cfg, s.policy, s.env, s.critic, opts...)
}

// Progress reads the collection's live counters (see collect.ProgressSnapshot): safe
// to call at any time, from any goroutine, without waiting for the engine. Before the
// run starts the counts are 0 and Budget is the spec's; once ended they match the
// tree's stats.
func (s *Session) Progress() collect.ProgressSnapshot {
	p := s.progress.Snapshot()
	if p.Budget == 0 {
		p.Budget = s.cfg.Search.Budget
	}
	return p
}

// Cancel stops the collection: a running one ends soon with the tree so far and a
// status.Cancelled error; one not started yet ends at once without running. Cancelling
// an ended session does nothing.
func (s *Session) Cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.phase {
	case built:
		s.out = Outcome{Err: status.Errorf(status.Cancelled, "collection: cancelled before it started")}
		s.phase = ended
		close(s.done)
	case running:
		s.cancel()
	}
}

// Done is closed when the collection has ended (or was cancelled before it started).
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait waits until the collection ends (true), timeout passes (false; negative: no
// limit) or ctx ends (a status.Cancelled error). A session never started has nothing to
// wait for: that is an error.
func (s *Session) Wait(ctx context.Context, timeout time.Duration) (bool, error) {
	if err := s.started(); err != nil {
		return false, err
	}
	var expired <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-s.done:
		return true, nil
	case <-expired:
		return false, nil
	case <-ctx.Done():
		return false, status.Wrap(status.Cancelled, ctx.Err(), "collection wait")
	}
}

func (s *Session) started() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase == built {
		return status.Errorf(status.InvalidArgument, "collection: not started; start it first")
	}
	return nil
}

// Result hands over the ended collection's Outcome. The tree is handed over once: a
// second call is an error, as is a call before the collection ends.
func (s *Session) Result() (Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.phase == built:
		return Outcome{}, status.Errorf(status.InvalidArgument, "collection: not started; start it first")
	case s.phase == running:
		return Outcome{}, status.Errorf(status.InvalidArgument, "collection: still running; wait for it first")
	case s.taken:
		return Outcome{}, status.Errorf(status.InvalidArgument, "collection: result already taken")
	}
	s.taken = true
	return s.out, nil
}

// Poll takes up to limit queued requests of the remote parts (see core/bridge for the
// kinds), waiting for at least one until ctx ends. Once the collection has ended (no
// more requests will come) it returns a status.Cancelled error saying so.
func (s *Session) Poll(ctx context.Context, limit int) ([]bridge.Request, error) {
	reqs, err := s.bridge.PollMany(ctx, limit)
	if err != nil && bridge.IsClosed(err) {
		return nil, status.Wrap(status.Cancelled, err, "collection finished")
	}
	return reqs, err
}

// Resolve answers request id with a JSON payload.
func (s *Session) Resolve(id uint64, payload []byte) error { return s.bridge.Resolve(id, payload) }

// Answer answers request id with a reply that may carry token ids and logprobs.
func (s *Session) Answer(id uint64, reply bridge.Reply) error { return s.bridge.Answer(id, reply) }

// Fail answers request id with an error; the engine records it as a failed rollout or
// critic call.
func (s *Session) Fail(id uint64, code status.Code, message string) error {
	return s.bridge.Fail(id, code, message)
}

// Close cancels the collection, waits for it to end and releases the bridge and what
// New opened. It is safe to call more than once and always returns nil (it is the
// handle table's io.Closer).
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.Cancel()
		<-s.done
		s.bridge.Close()
		if s.release != nil {
			s.release()
		}
	})
	return nil
}
