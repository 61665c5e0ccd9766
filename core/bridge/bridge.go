package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/focus-go/focus-go/core/status"
)

// Kinds of requests (see the package documentation for their payloads).
const (
	KindPolicyGenerate = "policy.generate"
	KindEnvReset       = "env.reset"
	KindEnvStep        = "env.step"
	KindEnvFork        = "env.fork"
	KindEnvClose       = "env.close" // notification
	KindCriticScore    = "critic.score"
	KindCancel         = "cancel" // notification: ID names the abandoned request
)

// ErrClosed is returned by Poll and Call once the bridge is closed. Its code
// is status.Cancelled.
var ErrClosed error = &status.Error{Code: status.Cancelled, Msg: "bridge: closed"}

// Request is one call for the Python side to serve.
type Request struct {
	ID      uint64          `json:"id"`
	Kind    string          `json:"kind"`
	Object  int64           `json:"object"`
	Payload json.RawMessage `json:"payload"`
	// Tokens is a policy.generate request's prefix, or an env.step token action's ids
	// (never empty-but-nil for one: an empty chunk is []uint32{}), carried beside the
	// JSON payload so that the C boundary passes it as an array.
	Tokens []uint32 `json:"-"`
}

// Reply is the answer to a call: a JSON payload and, for policy.generate, the generated
// ids and their logprobs beside it (nil when the payload carries them).
type Reply struct {
	Payload  []byte
	Tokens   []uint32
	Logprobs []float64
}

type reply struct {
	Reply
	err error
}

type pending struct {
	kind   string
	object int64
	queued bool // still in the queue, not yet polled
	done   chan reply
}

// Bridge is the request queue of one collection.
type Bridge struct {
	mu      sync.Mutex
	nextID  uint64
	queue   []Request
	pending map[uint64]*pending
	closed  bool
	wake    chan struct{} // one token while the queue may be non-empty
	done    chan struct{} // closed by Close
}

// New returns an open bridge with an empty queue.
func New() *Bridge {
	return &Bridge{pending: map[uint64]*pending{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// signal makes sure one poller wakes up. Caller holds mu.
func (b *Bridge) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Call puts a request on the queue and waits for its reply. The error is
// the Python side's Fail (with its code), ctx's end (status.Cancelled or
// status.Timeout; the request is withdrawn, or a "cancel" notification is
// queued if it was already polled) or ErrClosed.
func (b *Bridge) Call(ctx context.Context, kind string, object int64, payload []byte) ([]byte, error) {
	r, err := b.Send(ctx, Request{Kind: kind, Object: object, Payload: payload})
	return r.Payload, err
}

// Send is Call for a whole request (its ID is assigned here) and a whole reply.
func (b *Bridge) Send(ctx context.Context, req Request) (Reply, error) {
	kind, object := req.Kind, req.Object
	if err := ctx.Err(); err != nil {
		return Reply{}, status.Wrap(status.CodeOf(err), err, "bridge: %s to object %d not sent", kind, object)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return Reply{}, ErrClosed
	}
	b.nextID++
	id := b.nextID
	req.ID = id
	p := &pending{kind: kind, object: object, queued: true, done: make(chan reply, 1)}
	b.pending[id] = p
	b.queue = append(b.queue, req)
	b.signal()
	b.mu.Unlock()

	select {
	case r := <-p.done:
		return r.Reply, r.err
	case <-ctx.Done():
		b.abandon(id, p)
		select {
		case r := <-p.done: // resolved in the meantime: the answer wins
			return r.Reply, r.err
		default:
		}
		return Reply{}, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "bridge: %s call %d to object %d abandoned", kind, id, object)
	}
}

// abandon forgets a call whose caller stopped waiting.
func (b *Bridge) abandon(id uint64, p *pending) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[id] != p {
		return // already resolved, failed or closed
	}
	delete(b.pending, id)
	if p.queued {
		for i := range b.queue {
			if b.queue[i].ID == id {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
		return
	}
	if !b.closed {
		b.queue = append(b.queue, Request{ID: id, Kind: KindCancel, Object: p.object, Payload: json.RawMessage(`{}`)})
		b.signal()
	}
}

// Notify queues a request that expects no reply (KindEnvClose). It is
// dropped silently once the bridge is closed.
func (b *Bridge) Notify(kind string, object int64, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.nextID++
	b.queue = append(b.queue, Request{ID: b.nextID, Kind: kind, Object: object, Payload: payload})
	b.signal()
}

// Poll takes the oldest queued request, waiting until there is one. It
// returns ctx's error (status.Timeout or status.Cancelled: poll again) or
// ErrClosed (stop polling).
func (b *Bridge) Poll(ctx context.Context) (Request, error) {
	rs, err := b.PollMany(ctx, 1)
	if err != nil {
		return Request{}, err
	}
	return rs[0], nil
}

// PollMany is Poll for up to limit requests (at least one), oldest first: a poller
// that serves many concurrent calls takes every queued request in one wake-up.
func (b *Bridge) PollMany(ctx context.Context, limit int) ([]Request, error) {
	limit = max(limit, 1)
	for {
		b.mu.Lock()
		if b.closed && len(b.queue) == 0 {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		if len(b.queue) > 0 {
			n := min(limit, len(b.queue))
			rs := slices.Clone(b.queue[:n])
			clear(b.queue[:n])
			b.queue = b.queue[n:]
			for _, r := range rs {
				if p := b.pending[r.ID]; p != nil && r.Kind != KindCancel {
					p.queued = false
				}
			}
			if len(b.queue) > 0 {
				b.signal() // let another poller take the next ones
			}
			b.mu.Unlock()
			return rs, nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-b.done:
		case <-ctx.Done():
			return nil, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "bridge: poll")
		}
	}
}

// take removes the pending call id for an answer.
func (b *Bridge) take(id uint64, verb string) (*pending, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[id]
	switch {
	case b.closed:
		return nil, status.Errorf(status.InvalidHandle, "bridge: %s %d: the bridge is closed", verb, id)
	case p == nil:
		return nil, status.Errorf(status.InvalidHandle, "bridge: %s %d: no pending call with that id (already answered, abandoned, a notification, or never issued)", verb, id)
	case p.queued:
		return nil, status.Errorf(status.InvalidHandle, "bridge: %s %d: the call has not been polled yet", verb, id)
	}
	delete(b.pending, id)
	return p, nil
}

// Resolve answers call id with a JSON payload.
func (b *Bridge) Resolve(id uint64, payload []byte) error {
	return b.Answer(id, Reply{Payload: payload})
}

// Answer answers call id with a whole reply.
func (b *Bridge) Answer(id uint64, r Reply) error {
	p, err := b.take(id, "resolve")
	if err != nil {
		return err
	}
	p.done <- reply{Reply: r}
	return nil
}

// Fail answers call id with an error of the given code (status.Internal if
// code is OK or unknown).
func (b *Bridge) Fail(id uint64, code status.Code, message string) error {
	p, err := b.take(id, "fail")
	if err != nil {
		return err
	}
	if code <= status.OK || code > status.NotFound {
		code = status.Internal
	}
	p.done <- reply{err: status.Errorf(code, "%s", message)}
	return nil
}

// Close fails every pending call with ErrClosed (status.Cancelled),
// withdraws the queued calls and wakes every poller. Pollers still receive
// the queued notifications (env.close) and a "cancel" for every call they
// were serving, then ErrClosed. It is safe to call more than once.
func (b *Bridge) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	// Keep the notifications (env.close, cancel) so pollers can still learn
	// which objects to drop; withdraw the calls nobody took.
	kept := b.queue[:0]
	for _, r := range b.queue {
		if b.pending[r.ID] == nil {
			kept = append(kept, r)
		}
	}
	b.queue = kept
	ids := make([]uint64, 0, len(b.pending))
	for id := range b.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := b.pending[id]
		if !p.queued {
			// Python is serving it: tell it to stop.
			b.queue = append(b.queue, Request{ID: id, Kind: KindCancel, Object: p.object, Payload: json.RawMessage(`{}`)})
		}
		p.done <- reply{err: ErrClosed}
		delete(b.pending, id)
	}
	close(b.done)
}

// Closed reports whether Close was called.
func (b *Bridge) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Pending is the number of calls waiting for an answer (queued or polled).
func (b *Bridge) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// Queued is the number of requests waiting to be polled.
func (b *Bridge) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// IsClosed reports whether err is (or wraps) ErrClosed.
func IsClosed(err error) bool { return errors.Is(err, ErrClosed) }
