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
}

type reply struct {
	payload []byte
	err     error
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
	if err := ctx.Err(); err != nil {
		return nil, status.Wrap(status.CodeOf(err), err, "bridge: %s to object %d not sent", kind, object)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.nextID++
	id := b.nextID
	p := &pending{kind: kind, object: object, queued: true, done: make(chan reply, 1)}
	b.pending[id] = p
	b.queue = append(b.queue, Request{ID: id, Kind: kind, Object: object, Payload: payload})
	b.signal()
	b.mu.Unlock()

	select {
	case r := <-p.done:
		return r.payload, r.err
	case <-ctx.Done():
		b.abandon(id, p)
		select {
		case r := <-p.done: // resolved in the meantime: the answer wins
			return r.payload, r.err
		default:
		}
		return nil, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "bridge: %s call %d to object %d abandoned", kind, id, object)
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
	for {
		b.mu.Lock()
		if b.closed && len(b.queue) == 0 {
			b.mu.Unlock()
			return Request{}, ErrClosed
		}
		if len(b.queue) > 0 {
			r := b.queue[0]
			b.queue[0] = Request{}
			b.queue = b.queue[1:]
			if p := b.pending[r.ID]; p != nil && r.Kind != KindCancel {
				p.queued = false
			}
			if len(b.queue) > 0 {
				b.signal() // let another poller take the next one
			}
			b.mu.Unlock()
			return r, nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-b.done:
		case <-ctx.Done():
			return Request{}, status.Wrap(status.CodeOf(ctx.Err()), ctx.Err(), "bridge: poll")
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
	p, err := b.take(id, "resolve")
	if err != nil {
		return err
	}
	p.done <- reply{payload: payload}
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
