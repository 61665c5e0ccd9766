package fleet

import (
	"context"
	"errors"
	"math"
	"slices"
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
	// rebalanceBelow is the load (in flight and queued per slot) under which another
	// replica takes a tree whose own replica has a whole batch of requests queued.
	rebalanceBelow = 0.5
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

// Check is a replica's startup check: what the server said about itself.
type Check func(ctx context.Context) (Checked, error)

// Checked is what one replica's startup check learned.
type Checked struct {
	// Info is what the server said about itself (the backend's server info).
	Info any
	// Capacity is the requests it batches at once; 0 when it does not say.
	Capacity int
	// Model, Tokenizer and WeightVersion are its Identity; "" where it does not say.
	// Every replica of a fleet must serve the same one (StartupCheck).
	Model, Tokenizer, WeightVersion string
}

// MaxSlots bounds a replica's capacity and a fleet's limit (requests in flight).
const MaxSlots = 1 << 20

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
	// Cooldown is how long a replica that went down (see health.go) is first skipped;
	// 0: DefaultCooldown.
	Cooldown time.Duration
	// UnhealthyAfter is how many broken answers in a row take a replica down; 0:
	// DefaultUnhealthyAfter.
	UnhealthyAfter int
	// AllowWeightChange accepts a replica whose weight version changes during the run (a
	// trainer updating its weights): each Result then names the version that produced it.
	// Without it, a new weight version is refused like another model (identity.go).
	AllowWeightChange bool
	// VocabSize, when set, is the tokenizer's vocabulary size: an answer with a token id at
	// or above it is malformed (health.go).
	VocabSize int
}

type replica struct {
	Replica
	slots    int       // the requests it may have in flight: its Capacity (a Limit caps them all together)
	inFlight int       // requests holding one of its slots
	queue    []*waiter // requests waiting for one, oldest first
	health
	served  int64
	failed  int64
	ident   Identity // what its server said it serves (identity.go)
	refused *refusal // it served another identity: no more requests
	warned  bool     // its unknown identity was warned about
	recheck bool     // it went down: its probe runs its Check first
}

type waiter struct {
	ready   chan struct{}
	granted bool
	seq     uint64 // arrival order over the whole fleet
}

// Fleet is a Policy over one or more replicas that schedules by requests in flight (see
// the package comment). Create it with New.
type Fleet struct {
	routing  Routing
	cooldown time.Duration
	after    int // Config.UnhealthyAfter
	vocab    int // Config.VocabSize

	allowWeights bool // Config.AllowWeightChange

	mu        sync.Mutex
	limit     int
	reps      []*replica
	reserved  int       // units admitted tickets still hold
	unbound   []*Ticket // admitted, no request seen yet (oldest first)
	admitting []*Ticket // Admit calls waiting, oldest first
	byTree    map[uint64]*Ticket
	affinity  map[uint64]int // tree -> the replica that holds its prefix
	next      int            // round-robin cursor and tie breaker
	seq       uint64         // waiters numbered in arrival order
	changed   chan struct{}  // closed (and replaced) when demand falls or capacity changes
	peak      int
	admitted  int64
	moved     int64    // trees that left the replica holding their prefix
	closed    bool     // Close was called: no more admissions
	ident     Identity // the fleet's identity: the first replica's that names its model
	from      int      // the replica it came from; -1 before one named its model
	versions  []string // the weight versions served, in the order seen
	warnings  []string // identity warnings, each once
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
	if cfg.Limit > MaxSlots {
		return nil, status.Errorf(status.InvalidArgument, "fleet: limit %d is too large: at most %d requests in flight", cfg.Limit, MaxSlots)
	}
	if cfg.Limit < 0 || cfg.Cooldown < 0 || cfg.UnhealthyAfter < 0 || cfg.VocabSize < 0 {
		return nil, status.Errorf(status.InvalidArgument, "fleet: limit %d, cooldown %v, unhealthy_after %d and vocab_size %d must not be negative",
			cfg.Limit, cfg.Cooldown, cfg.UnhealthyAfter, cfg.VocabSize)
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.UnhealthyAfter == 0 {
		cfg.UnhealthyAfter = DefaultUnhealthyAfter
	}
	f := &Fleet{routing: cfg.Routing, cooldown: cfg.Cooldown, after: cfg.UnhealthyAfter, limit: cfg.Limit,
		vocab: cfg.VocabSize, allowWeights: cfg.AllowWeightChange, from: -1,
		byTree: map[uint64]*Ticket{}, affinity: map[uint64]int{}, changed: make(chan struct{})}
	for i, r := range cfg.Replicas {
		if r.Policy == nil {
			return nil, status.Errorf(status.InvalidArgument, "fleet: replica %d (%s) has no policy", i, r.Name)
		}
		if r.Capacity > MaxSlots {
			return nil, status.Errorf(status.InvalidArgument, "fleet: replica %s capacity %d is too large: at most %d requests at once", r.Name, r.Capacity, MaxSlots)
		}
		if r.Capacity < 0 {
			return nil, status.Errorf(status.InvalidArgument, "fleet: replica %s capacity %d is negative", r.Name, r.Capacity)
		}
		if r.Capacity == 0 {
			r.Capacity = DefaultCapacity
		}
		f.reps = append(f.reps, &replica{Replica: r})
	}
	f.apportion()
	return f, nil
}

// apportion sets each replica's slots: its capacity. A Limit is not split between the
// replicas: it caps the requests in flight over all of them together (see grant), so that
// every replica that is up can serve and take over another's trees, however small it is.
func (f *Fleet) apportion() {
	for _, r := range f.reps {
		r.slots = r.Capacity
	}
}

// Replicas is the number of replicas.
func (f *Fleet) Replicas() int { return len(f.reps) }

// SetCapacity sets replica i's capacity (what its server reported); n <= 0 leaves it.
func (f *Fleet) SetCapacity(i, n int) {
	if n <= 0 || i < 0 || i >= len(f.reps) {
		return
	}
	n = min(n, MaxSlots)
	f.mu.Lock()
	f.reps[i].Capacity = n
	f.apportion()
	f.grant()
	f.signal()
	f.mu.Unlock()
}

// Capacity is the requests in flight the fleet allows at once: Config.Limit when set, else
// the sum of the replicas' capacities.
func (f *Fleet) Capacity() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity()
}

func (f *Fleet) capacity() int {
	n := 0
	for _, r := range f.reps {
		n += r.slots
	}
	if f.limit > 0 {
		return min(n, f.limit)
	}
	return n
}

// free reports whether the Limit leaves room for one more request in flight.
func (f *Fleet) free() bool { return f.limit == 0 || f.inFlight() < f.limit }

// queued is the requests waiting for a slot on any replica.
func (f *Fleet) queued() int {
	n := 0
	for _, r := range f.reps {
		n += len(r.queue)
	}
	return n
}

// demand is the requests in flight or waiting plus what admitted trees still reserve.
func (f *Fleet) demand() int {
	n := f.reserved
	for _, r := range f.reps {
		n += r.inFlight + len(r.queue)
	}
	return n
}

func (f *Fleet) inFlight() int {
	n := 0
	for _, r := range f.reps {
		n += r.inFlight
	}
	return n
}

// signal wakes every Admit waiting for demand to fall.
func (f *Fleet) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// grant hands free slots to waiting requests, oldest first over every replica whose own
// slots allow one, while the Limit leaves room.
func (f *Fleet) grant() {
	for f.free() {
		var best *replica
		for _, r := range f.reps {
			if len(r.queue) > 0 && r.inFlight < r.slots && (best == nil || r.queue[0].seq < best.queue[0].seq) {
				best = r
			}
		}
		if best == nil {
			break
		}
		w := best.queue[0]
		best.queue[0] = nil
		best.queue = best.queue[1:]
		w.granted = true
		best.inFlight++
		close(w.ready)
	}
	f.peak = max(f.peak, f.inFlight())
}

func ctxError(ctx context.Context, what string) error {
	code := status.Cancelled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = status.Timeout
	}
	return status.Wrap(code, ctx.Err(), "fleet: %s", what)
}

// take chooses the replica for one request of tree (see Routing) and waits for one of its
// slots, FIFO behind the requests already waiting there. first (a request's first attempt)
// turns a unit of the tree's reservation into this request in the same critical section,
// so demand never dips between the two and lets an Admit through that does not fit.
func (f *Fleet) take(ctx context.Context, tree uint64, tried uint64, first bool) (int, error) {
	f.mu.Lock()
	if first {
		f.consume(tree)
	}
	i := f.choose(tree, tried)
	r := f.reps[i]
	// With a Limit, a request waiting on another replica goes first (FIFO over the fleet).
	if len(r.queue) == 0 && r.inFlight < r.slots && f.free() && (f.limit == 0 || f.queued() == 0) {
		r.inFlight++
		f.peak = max(f.peak, f.inFlight())
		f.mu.Unlock()
		return i, nil
	}
	f.seq++
	w := &waiter{ready: make(chan struct{}), seq: f.seq}
	r.queue = append(r.queue, w)
	f.grant()
	f.mu.Unlock()
	select {
	case <-w.ready:
		return i, nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.granted { // granted as the context ended: pass the slot on
		r.inFlight--
	} else {
		for k, q := range r.queue {
			if q == w {
				r.queue = append(r.queue[:k], r.queue[k+1:]...)
				break
			}
		}
	}
	f.grant()
	f.signal()
	return i, ctxError(ctx, "waiting for a free request slot")
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

// Generate sends req to a replica (see Routing) once it has a free slot. A request that
// the replica could not serve (it cannot be reached, answers 5xx after its own retries,
// passes its deadline, answers something unreadable or malformed, an empty completion,
// one without logprobs, or aborts: see health.go), or that a replica refused for serving
// another model (identity.go), goes to another replica, and the tree then stays there; the
// replica's health counts the answer. The last replica's answer is returned when every
// one was tried; a malformed one is a status.Backend error naming the replica and what
// it answered.
func (f *Fleet) Generate(ctx context.Context, req generate.Request) (*generate.Result, error) {
	var tried uint64 // replicas already tried (bit i); past 64 replicas retries may repeat one
	var res *generate.Result
	var err error
	for attempt := 0; attempt < len(f.reps); attempt++ {
		var i int
		if i, err = f.take(ctx, req.Tree, tried, attempt == 0); err != nil {
			return nil, err
		}
		res, err = f.serve(ctx, i, req)
		v, malformed := judge(ctx, res, err, f.vocab)
		if malformed != "" {
			res, err = nil, status.Errorf(status.Backend, "fleet: replica %d of %d (%s) answered %s",
				i+1, len(f.reps), f.reps[i].Name, malformed)
		}
		f.finish(i, err, v)
		if v != broken && v != gone && v != refused {
			return res, err
		}
		tried |= 1 << (uint(i) % 64)
	}
	return res, err
}

// serve sends req to replica i: first its Check when it comes back from down, then the
// request, whose answer's weight version is checked (identity.go).
func (f *Fleet) serve(ctx context.Context, i int, req generate.Request) (*generate.Result, error) {
	if err := f.recheck(ctx, i); err != nil {
		return nil, err
	}
	res, err := f.reps[i].Policy.Generate(ctx, req)
	if err == nil && res != nil {
		if err := f.answered(i, res); err != nil {
			return nil, err
		}
	}
	return res, err
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

// choose picks the replica for one request of tree. Affinity: the tree's replica while it
// is up and its load allows (it waits there, where the tree's prefix is cached, unless a
// whole batch is already queued there while another replica is under half full), else the up replica with the least load (in
// flight and queued per slot), which then holds the tree. RoundRobin: the
// next up replica. A replica with no slots (a Limit smaller than the replicas) is skipped.
func (f *Fleet) choose(tree uint64, tried uint64) int {
	now := time.Now()
	n := len(f.reps)
	usable := func(i int) bool {
		r := f.reps[i]
		return r.slots > 0 && r.refused == nil && tried&(1<<(uint(i)%64)) == 0 && r.up(now, r.inFlight)
	}
	if n == 1 {
		return 0
	}
	if f.routing == RoundRobin {
		for k := 0; k < n; k++ {
			if i := (f.next + k) % n; usable(i) {
				f.next = i + 1
				return i
			}
		}
	} else {
		best, load := -1, math.Inf(1)
		for k := 0; k < n; k++ {
			i := (f.next + k) % n
			if !usable(i) {
				continue
			}
			r := f.reps[i]
			if l := float64(r.inFlight+len(r.queue)) / float64(r.slots); l < load {
				best, load = i, l
			}
		}
		if i, ok := f.affinity[tree]; ok && tree != 0 && usable(i) {
			// The tree stays (and queues) where its prefix is cached unless that replica has
			// a full batch queued behind its running one while another is under half full.
			if r := f.reps[i]; len(r.queue) < r.slots || load > rebalanceBelow {
				return i
			}
		}
		if best >= 0 {
			f.next = (f.next + 1) % n
			if i, ok := f.affinity[tree]; ok && tree != 0 && i != best {
				f.moved++
			}
			if tree != 0 {
				if len(f.affinity) >= maxAffinity {
					clear(f.affinity)
				}
				f.affinity[tree] = best
			}
			return best
		}
	}
	// Every replica is down or tried: the untried one that comes back first, else any.
	best := -1
	for i, r := range f.reps {
		if r.slots > 0 && r.refused == nil && tried&(1<<(uint(i)%64)) == 0 && (best < 0 || r.downUntil.Before(f.reps[best].downUntil)) {
			best = i
		}
	}
	if best < 0 {
		for k := 0; k < n; k++ {
			if i := (f.next + k) % n; f.reps[i].slots > 0 {
				best = i
				break
			}
		}
		f.next++
	}
	return best
}

// finish ends one request on replica i, counting its answer's verdict into the replica's
// health. A replica that goes down keeps its trees' affinity until each tree's next
// request, which choose moves to a replica that is up (counted in Load.Moved).
func (f *Fleet) finish(i int, err error, v verdict) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reps[i]
	r.inFlight--
	if err != nil || v == broken {
		r.failed++
	} else {
		r.served++
	}
	if r.record(v, f.cooldown, f.after) {
		r.recheck = true
	}
	f.grant()
	f.signal()
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
// given back by Release). Admissions are granted in the order they were asked for, so no
// problem waits behind later ones.
func (f *Fleet) Admit(ctx context.Context, width int) (*Ticket, error) {
	if width < 1 {
		return nil, status.Errorf(status.InvalidArgument, "fleet: admission width %d: want at least 1 request", width)
	}
	t := &Ticket{f: f, remaining: width}
	f.mu.Lock()
	f.admitting = append(f.admitting, t)
	for {
		// An ended context is never admitted, even when room and its end arrive together:
		// its reservation would have no tree to turn into requests or release it.
		if ctx.Err() != nil || f.closed {
			for i, a := range f.admitting {
				if a == t {
					f.admitting = append(f.admitting[:i], f.admitting[i+1:]...)
					break
				}
			}
			f.signal()
			f.mu.Unlock()
			if ctx.Err() == nil {
				return nil, status.Errorf(status.InvalidHandle, "fleet: this policy is closed; no tree is admitted")
			}
			return nil, ctxError(ctx, "waiting to admit a tree")
		}
		if f.admitting[0] == t && f.demand() < f.capacity() {
			f.admitting = f.admitting[1:]
			f.reserved += width
			f.unbound = append(f.unbound, t)
			f.admitted++
			f.signal() // the next in line may fit too
			f.mu.Unlock()
			return t, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		f.mu.Lock()
	}
}

// Close ends admissions: an Admit waiting now, or called later, returns a
// status.InvalidHandle error. Requests already admitted go on.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.signal()
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
	Name string `json:"name"`
	// Model, Tokenizer and WeightVersion are its Identity as its server last reported it
	// ("" before its startup check, or where the server does not say).
	Model         string `json:"model"`
	Tokenizer     string `json:"tokenizer,omitempty"`
	WeightVersion string `json:"weight_version,omitempty"`
	// Refused says why it gets no requests: it served another identity (identity.go).
	Refused  string `json:"refused,omitempty"`
	Capacity int    `json:"capacity"`
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	Served   int64  `json:"served"`
	Failed   int64  `json:"failed"`
	// Down: the replica is down, or back on probation and not yet answered well.
	Down bool `json:"down"`
	// Downs counts the times it went down (see health.go).
	Downs int64 `json:"downs"`
}

// Load is a snapshot of the fleet's scheduling state.
type Load struct {
	Capacity     int           `json:"capacity"`
	InFlight     int           `json:"in_flight"`
	Queued       int           `json:"queued"`
	Reserved     int           `json:"reserved"`
	PeakInFlight int           `json:"peak_in_flight"`
	Admitted     int64         `json:"admitted"`
	Moved        int64         `json:"moved"`
	Routing      Routing       `json:"routing"`
	Replicas     []ReplicaLoad `json:"replicas"`
	// Identity is the model the fleet serves (identity.go): the first replica's that
	// named its model, with the latest weight version served.
	Identity Identity `json:"identity"`
	// WeightVersions lists every weight version answers came from, in the order seen
	// (more than one only with Config.AllowWeightChange).
	WeightVersions []string `json:"weight_versions,omitempty"`
	// Warnings are the identity warnings (a replica that does not say what it serves, a
	// replica refused), each once.
	Warnings []string `json:"warnings,omitempty"`
}

// Load reports the capacity, the requests in flight, waiting and reserved, and each
// replica's counters.
func (f *Fleet) Load() Load {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	l := Load{Capacity: f.capacity(), Reserved: f.reserved, PeakInFlight: f.peak, Admitted: f.admitted, Moved: f.moved, Routing: f.routing,
		Identity: f.ident, WeightVersions: slices.Clone(f.versions), Warnings: slices.Clone(f.warnings)}
	for _, r := range f.reps {
		l.InFlight += r.inFlight
		l.Queued += len(r.queue)
		rl := ReplicaLoad{Name: r.Name, Model: r.ident.Model, Tokenizer: r.ident.Tokenizer, WeightVersion: r.ident.WeightVersion,
			Capacity: r.slots, InFlight: r.inFlight, Queued: len(r.queue), Served: r.served, Failed: r.failed,
			Down: r.isDown(now) || r.refused != nil, Downs: r.downs}
		if r.refused != nil {
			rl.Refused = r.refused.Error()
		}
		l.Replicas = append(l.Replicas, rl)
	}
	return l
}
