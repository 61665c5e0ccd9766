package fleet

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/status"
)

// Policy is one server replica's generation client (collect.Policy's method).
type Policy interface {
	Generate(ctx context.Context, req generate.Request) (*generate.Result, error)
}

// Routing chooses how a Fleet spreads requests over its replicas.
type Routing string

const (
	// Affinity keeps a tree's requests on the replica that served its prefix while that
	// replica has a free slot, and starts new trees on the least-loaded replica.
	Affinity Routing = "affinity"
	// RoundRobin sends each request to the next replica in turn (the baseline that
	// scatters a tree's branches over replicas that do not hold its prefix).
	RoundRobin Routing = "round_robin"
)

const (
	// DefaultCapacity is a replica's capacity (sequences it batches at once) when neither
	// the server nor the caller says: vLLM's default max_num_seqs.
	DefaultCapacity = 256
	// DefaultCooldown is how long a replica that stopped answering gets no new requests.
	DefaultCooldown = 5 * time.Second
	// maxAffinity bounds the tree-to-replica map; past it the oldest trees are forgotten.
	maxAffinity = 1 << 16
)

// Replica is one server of the fleet.
type Replica struct {
	// Name identifies it in Load (its base URL).
	Name   string
	Policy Policy
	// Capacity is the requests it serves at once; 0: DefaultCapacity until the server
	// reports its own (StartupCheck) or SetCapacity.
	Capacity int
	// Check, when set, is the replica's startup check (see StartupCheck).
	Check Check
}

// Check is a replica's startup check: what the server said about itself and the requests
// it batches at once (0 when it does not say).
type Check func(ctx context.Context) (info any, capacity int, err error)

// ClientSlots is the per-client request cap to give each replica's HTTP client when the
// caller set no limit of its own: high enough that the fleet, not the transport, decides
// how many requests are in flight.
const ClientSlots = 1 << 12

// Config describes a Fleet.
type Config struct {
	Replicas []Replica
	// Limit caps the requests in flight over every replica together; 0: the sum of the
	// replicas' capacities.
	Limit int
	// Routing is Affinity (the zero value) or RoundRobin.
	Routing Routing
	// Cooldown is how long a replica that failed with a connection error or a 5xx is
	// skipped; 0: DefaultCooldown.
	Cooldown time.Duration
}

type replica struct {
	Replica
	inFlight  int
	downUntil time.Time
	served    int64
	failed    int64
}

type waiter struct {
	ready   chan struct{}
	granted bool
}

// Fleet is a Policy over one or more replicas that schedules by requests in flight (see
// the package comment). Create it with New.
type Fleet struct {
	routing  Routing
	cooldown time.Duration

	mu       sync.Mutex
	limit    int
	reps     []*replica
	inFlight int       // requests holding a slot
	queue    []*waiter // requests waiting for one, oldest first
	reserved int       // units admitted tickets still hold
	unbound  []*Ticket // admitted, no request seen yet (oldest first)
	byTree   map[uint64]*Ticket
	affinity map[uint64]int // tree -> replica index
	next     int            // round-robin cursor and tie breaker
	changed  chan struct{}  // closed (and replaced) when demand falls or capacity changes
	peak     int
	admitted int64
}

// New validates cfg and builds a Fleet. It contacts no server.
func New(cfg Config) (*Fleet, error) {
	if len(cfg.Replicas) == 0 {
		return nil, status.Errorf(status.InvalidArgument, "fleet: no server replicas; give at least one server URL")
	}
	switch cfg.Routing {
	case "":
		cfg.Routing = Affinity
	case Affinity, RoundRobin:
	default:
		return nil, status.Errorf(status.InvalidArgument, "fleet: routing %q: want %q or %q", cfg.Routing, Affinity, RoundRobin)
	}
	if cfg.Limit < 0 || cfg.Cooldown < 0 {
		return nil, status.Errorf(status.InvalidArgument, "fleet: limit %d and cooldown %v must not be negative", cfg.Limit, cfg.Cooldown)
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = DefaultCooldown
	}
	f := &Fleet{routing: cfg.Routing, cooldown: cfg.Cooldown, limit: cfg.Limit,
		byTree: map[uint64]*Ticket{}, affinity: map[uint64]int{}, changed: make(chan struct{})}
	for i, r := range cfg.Replicas {
		if r.Policy == nil {
			return nil, status.Errorf(status.InvalidArgument, "fleet: replica %d (%s) has no policy", i, r.Name)
		}
		if r.Capacity < 0 {
			return nil, status.Errorf(status.InvalidArgument, "fleet: replica %s capacity %d is negative", r.Name, r.Capacity)
		}
		if r.Capacity == 0 {
			r.Capacity = DefaultCapacity
		}
		f.reps = append(f.reps, &replica{Replica: r})
	}
	return f, nil
}

// Replicas is the number of replicas.
func (f *Fleet) Replicas() int { return len(f.reps) }

// SetCapacity sets replica i's capacity (what its server reported); n <= 0 leaves it.
func (f *Fleet) SetCapacity(i, n int) {
	if n <= 0 || i < 0 || i >= len(f.reps) {
		return
	}
	f.mu.Lock()
	f.reps[i].Capacity = n
	f.grant()
	f.signal()
	f.mu.Unlock()
}

// StartupCheck runs every replica's Check in order and returns what each server said. A
// capacity a server reports replaces the replica's configured one (the caller's figure is
// for servers that do not say). The first replica that fails ends the check with its error.
func (f *Fleet) StartupCheck(ctx context.Context) ([]any, error) {
	infos := make([]any, len(f.reps))
	for i, r := range f.reps {
		if r.Check == nil {
			continue
		}
		info, capacity, err := r.Check(ctx)
		if err != nil {
			if len(f.reps) > 1 {
				return nil, status.Wrap(status.CodeOf(err), err, "fleet: replica %d of %d (%s)", i+1, len(f.reps), r.Name)
			}
			return nil, err
		}
		infos[i] = info
		f.SetCapacity(i, capacity)
	}
	return infos, nil
}

// Capacity is the requests in flight the fleet allows at once: Config.Limit when set, else
// the sum of the replicas' capacities.
func (f *Fleet) Capacity() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity()
}

func (f *Fleet) capacity() int {
	if f.limit > 0 {
		return f.limit
	}
	n := 0
	for _, r := range f.reps {
		n += r.Capacity
	}
	return n
}

// demand is the requests in flight or waiting plus what admitted trees still reserve.
func (f *Fleet) demand() int { return f.inFlight + len(f.queue) + f.reserved }

// signal wakes every Admit waiting for demand to fall.
func (f *Fleet) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// grant hands free slots to the oldest waiting requests.
func (f *Fleet) grant() {
	capacity := f.capacity()
	for len(f.queue) > 0 && f.inFlight < capacity {
		w := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		w.granted = true
		f.inFlight++
		close(w.ready)
	}
	f.peak = max(f.peak, f.inFlight)
}

func ctxError(ctx context.Context, what string) error {
	code := status.Cancelled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = status.Timeout
	}
	return status.Wrap(code, ctx.Err(), "fleet: %s", what)
}

// acquire takes a slot for a request of tree (FIFO behind the requests already waiting).
func (f *Fleet) acquire(ctx context.Context, tree uint64) error {
	f.mu.Lock()
	f.consume(tree)
	if len(f.queue) == 0 && f.inFlight < f.capacity() {
		f.inFlight++
		f.peak = max(f.peak, f.inFlight)
		f.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{})}
	f.queue = append(f.queue, w)
	f.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.granted { // granted as the context ended: pass the slot on
		f.inFlight--
	} else {
		for i, q := range f.queue {
			if q == w {
				f.queue = append(f.queue[:i], f.queue[i+1:]...)
				break
			}
		}
	}
	f.grant()
	f.signal()
	return ctxError(ctx, "waiting for a free request slot")
}

func (f *Fleet) releaseSlot() {
	f.mu.Lock()
	f.inFlight--
	f.grant()
	f.signal()
	f.mu.Unlock()
}

// consume turns one unit of tree's reservation into a real request; a tree seen for the
// first time takes the oldest unbound ticket.
func (f *Fleet) consume(tree uint64) {
	if tree == 0 {
		return
	}
	t := f.byTree[tree]
	if t == nil {
		if len(f.unbound) == 0 {
			return
		}
		t = f.unbound[0]
		f.unbound[0] = nil
		f.unbound = f.unbound[1:]
		t.tree = tree
		f.byTree[tree] = t
	}
	if t.remaining > 0 {
		t.remaining--
		f.reserved--
	}
}

// Generate sends req to a replica (see Routing) once a slot is free. A replica that cannot
// be reached or answers 5xx (after its own retries) is skipped for the cooldown and the
// request goes to another replica; the tree then stays there.
func (f *Fleet) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	if err := f.acquire(ctx, req.Tree); err != nil {
		return nil, err
	}
	defer f.releaseSlot()
	var tried uint64 // replicas already tried (bit i); past 64 replicas retries may repeat one
	var lastErr error
	for attempt := 0; attempt < len(f.reps); attempt++ {
		i := f.pick(req.Tree, tried)
		r := f.reps[i]
		res, err := r.Policy.Generate(ctx, req)
		down := err != nil && ctx.Err() == nil && unreachable(err)
		f.finish(i, req.Tree, err, down)
		if err == nil || !down || len(f.reps) == 1 {
			return res, err
		}
		tried |= 1 << (uint(i) % 64)
		lastErr = err
	}
	return nil, lastErr
}

// unreachable reports whether err says the server is not there (no response, a 5xx) rather
// than that this request was wrong.
func unreachable(err error) bool {
	var u interface{ Unavailable() bool }
	if errors.As(err, &u) {
		return u.Unavailable()
	}
	return false
}

// pick chooses the replica for one request of tree and counts it in flight there.
func (f *Fleet) pick(tree uint64, tried uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	usable := func(i int) bool { return tried&(1<<(uint(i)%64)) == 0 && !now.Before(f.reps[i].downUntil) }
	choose := func(i int) int {
		f.reps[i].inFlight++
		if tree != 0 && f.routing == Affinity {
			if len(f.affinity) >= maxAffinity {
				clear(f.affinity)
			}
			f.affinity[tree] = i
		}
		return i
	}
	n := len(f.reps)
	if n == 1 {
		return choose(0)
	}
	if f.routing == RoundRobin {
		for k := 0; k < n; k++ {
			i := (f.next + k) % n
			if usable(i) {
				f.next = i + 1
				return choose(i)
			}
		}
	} else {
		if i, ok := f.affinity[tree]; ok && tree != 0 && usable(i) && f.reps[i].inFlight < f.reps[i].Capacity {
			return choose(i)
		}
		best, load := -1, math.Inf(1)
		for k := 0; k < n; k++ {
			i := (f.next + k) % n
			if !usable(i) {
				continue
			}
			if l := float64(f.reps[i].inFlight) / float64(f.reps[i].Capacity); l < load {
				best, load = i, l
			}
		}
		if best >= 0 {
			f.next = (f.next + 1) % n
			return choose(best)
		}
	}
	// Every replica is down or tried: the untried one that comes back first, else any.
	best := -1
	for i := range f.reps {
		if tried&(1<<(uint(i)%64)) == 0 && (best < 0 || f.reps[i].downUntil.Before(f.reps[best].downUntil)) {
			best = i
		}
	}
	if best < 0 {
		best = f.next % n
		f.next++
	}
	return choose(best)
}

// finish ends one request on replica i; a replica that was unreachable goes down for the
// cooldown and loses its trees.
func (f *Fleet) finish(i int, tree uint64, err error, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reps[i]
	r.inFlight--
	if err != nil {
		r.failed++
	} else {
		r.served++
	}
	if down {
		r.downUntil = time.Now().Add(f.cooldown)
		if tree != 0 && f.affinity[tree] == i {
			delete(f.affinity, tree)
		}
	}
}

// Ticket is one admitted tree's reservation (see Admit).
type Ticket struct {
	f         *Fleet
	remaining int
	tree      uint64
	released  bool
}

// Admit waits until the requests in flight, waiting and reserved drop below the capacity,
// then reserves width units (the tree's first burst: its warmup) and returns the ticket.
// The reservation turns into real requests as the next new tree's requests arrive (or is
// given back by Release). Admissions in one goroutine are granted in order.
func (f *Fleet) Admit(ctx context.Context, width int) (*Ticket, error) {
	if width < 1 {
		return nil, status.Errorf(status.InvalidArgument, "fleet: admission width %d: want at least 1 request", width)
	}
	for {
		f.mu.Lock()
		if f.demand() < f.capacity() {
			t := &Ticket{f: f, remaining: width}
			f.reserved += width
			f.unbound = append(f.unbound, t)
			f.admitted++
			f.mu.Unlock()
			return t, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctxError(ctx, "waiting to admit a tree")
		}
	}
}

// Release gives back what the ticket still reserves and forgets its tree; call it when the
// tree's collection has ended. A second call does nothing.
func (t *Ticket) Release() {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	f.reserved -= t.remaining
	t.remaining = 0
	for i, u := range f.unbound {
		if u == t {
			f.unbound = append(f.unbound[:i], f.unbound[i+1:]...)
			break
		}
	}
	if t.tree != 0 {
		delete(f.byTree, t.tree)
		delete(f.affinity, t.tree)
	}
	f.signal()
}

// ReplicaLoad is one replica's part of Load.
type ReplicaLoad struct {
	Name     string `json:"name"`
	Capacity int    `json:"capacity"`
	InFlight int    `json:"in_flight"`
	Served   int64  `json:"served"`
	Failed   int64  `json:"failed"`
	Down     bool   `json:"down"`
}

// Load is a snapshot of the fleet's scheduling state.
type Load struct {
	Capacity     int           `json:"capacity"`
	InFlight     int           `json:"in_flight"`
	Queued       int           `json:"queued"`
	Reserved     int           `json:"reserved"`
	PeakInFlight int           `json:"peak_in_flight"`
	Admitted     int64         `json:"admitted"`
	Routing      Routing       `json:"routing"`
	Replicas     []ReplicaLoad `json:"replicas"`
}

// Load reports the capacity, the requests in flight, waiting and reserved, and each
// replica's counters.
func (f *Fleet) Load() Load {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	l := Load{Capacity: f.capacity(), InFlight: f.inFlight, Queued: len(f.queue), Reserved: f.reserved,
		PeakInFlight: f.peak, Admitted: f.admitted, Routing: f.routing}
	for _, r := range f.reps {
		l.Replicas = append(l.Replicas, ReplicaLoad{Name: r.Name, Capacity: r.Capacity, InFlight: r.inFlight,
			Served: r.served, Failed: r.failed, Down: now.Before(r.downUntil)})
	}
	return l
}
