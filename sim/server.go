package sim

import (
	"cmp"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/core/status"
	"github.com/valyala/fasthttp"
)

// Server is one running simulated inference server.
type Server struct {
	cfg     Config
	model   *model
	tk      *tokenizer.Tokenizer
	tmpl    *jinja.Template
	dir     string
	ownDir  bool
	name    string
	vllmVer [3]int
	url     string
	started time.Time

	srv     *fasthttp.Server
	ln      net.Listener
	served  chan struct{}
	closing chan struct{}
	once    sync.Once
	closeMu sync.Mutex
	closed  bool

	// hijacked connections (faults) run outside fasthttp's bookkeeping
	hjMu     sync.Mutex
	hjCond   *sync.Cond
	hjActive int

	requestSeq atomic.Uint64 // seeds for requests without one, and response ids

	mu      sync.Mutex // guards faults, dice, stats, flights
	faults  []faultRule
	dice    *rand.Rand
	stats   Stats
	flights map[*flight]struct{}
	running int64
	// abortEpoch counts abort_all requests: a sequence that arrived before the latest one
	// is aborted however late it registers.
	abortEpoch uint64

	slots   chan struct{} // nil: unbounded
	waiting atomic.Int64
	cache   *prefixCache
}

// Stats counts what the server has done since Start.
type Stats struct {
	// Requests counts every HTTP request by path, unknown paths included.
	Requests map[string]int64 `json:"requests"`
	// Errors counts responses with a 4xx or 5xx status (injected ones included).
	Errors int64 `json:"errors"`
	// Faults counts fault rules that fired.
	Faults int64 `json:"faults"`
	// Sequences counts generated sequences (batch items and n > 1 choices each count).
	Sequences       int64 `json:"sequences"`
	PromptTokens    int64 `json:"prompt_tokens"`
	CachedTokens    int64 `json:"cached_tokens"`
	GeneratedTokens int64 `json:"generated_tokens"`
	// Aborted counts sequences that ended with finish reason abort.
	Aborted int64 `json:"aborted"`
	// PeakRunning is the most sequences that were generating at once.
	PeakRunning int64 `json:"peak_running"`
}

// flight is one sequence in progress, abortable through /abort_request.
type flight struct {
	rid   string
	abort chan struct{}
	once  sync.Once
	// epoch is the server's abort epoch when the request arrived: an abort_all that came
	// later covers the sequence even if it registers after the abort was answered.
	epoch uint64
	// running and stopped (guarded by Server.mu) say whether the sequence holds a slot
	// and whether an abort has stopped it; /v1/loads counts only live sequences.
	running, stopped bool
}

// stop aborts the sequence; the caller holds Server.mu.
func (f *flight) stop() {
	f.stopped = true
	f.once.Do(func() { close(f.abort) })
}

// Start writes (or opens) the model directory, loads its tokenizer and serves on
// 127.0.0.1 at a free port until Close.
func Start(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, started: time.Now(), served: make(chan struct{}), closing: make(chan struct{}),
		dice: rand.New(rand.NewSource(cfg.Seed)), flights: map[*flight]struct{}{},
		stats: Stats{Requests: map[string]int64{}}, faults: toRules(cfg.Faults),
		cache: newPrefixCache(cfg.Cache.Tokens)}
	s.hjCond = sync.NewCond(&s.hjMu)
	s.vllmVer, _ = parseVersion(cfg.VLLMVersion)
	if cfg.Latency.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, cfg.Latency.MaxConcurrent)
	}
	switch {
	case cfg.TokenizerDir != "":
		s.dir = cfg.TokenizerDir
	case cfg.ModelDir != "":
		s.dir = cfg.ModelDir
		if err := writeModelDir(s.dir); err != nil {
			return nil, err
		}
	default:
		// <tmp>/focus-sim-NNN/focus-sim-model, shared by the simulators of this process:
		// they serve one model path, as replicas of one model do (a fleet refuses replicas
		// whose model paths differ).
		dir, err := sharedDir.acquire()
		if err != nil {
			return nil, err
		}
		s.dir, s.ownDir = dir, true
	}
	fail := func(err error) (*Server, error) {
		if s.tk != nil {
			s.tk.Close()
		}
		if s.ownDir {
			sharedDir.release()
		}
		return nil, err
	}
	v, tmplSrc, err := loadVocab(s.dir)
	if err != nil {
		return fail(err)
	}
	if s.tmpl, err = compileTemplate(tmplSrc); err != nil {
		return fail(err)
	}
	if s.tk, err = tokenizer.Load(s.dir); err != nil {
		return fail(err)
	}
	s.model = &model{v: v, think: cfg.Think, toolErr: cfg.ToolCallErrorRate, verb: cfg.Verbosity}
	s.name = cfg.ModelName
	if s.name == "" {
		s.name = s.dir
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fail(status.Wrap(status.Internal, err, "sim: listening on 127.0.0.1"))
	}
	s.url = "http://" + ln.Addr().String()
	s.ln = ln
	s.srv = &fasthttp.Server{
		Handler:              s.handle,
		Name:                 "focus-sim",
		MaxRequestBodySize:   256 << 20,
		CloseOnShutdown:      true,
		IdleTimeout:          30 * time.Second,
		NoDefaultDate:        true,
		NoDefaultContentType: true,
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// ModelDir is the directory holding tokenizer.json and tokenizer_config.json.
func (s *Server) ModelDir() string { return s.dir }

// ModelName is the served model name (GET /v1/models), the model directory by default.
func (s *Server) ModelName() string { return s.name }

// EOS is the id of the token that ends every answer.
func (s *Server) EOS() uint32 { return s.model.v.eos }

// Tokenizer is the server's tokenizer (owned by the server: valid until Close).
func (s *Server) Tokenizer() *tokenizer.Tokenizer { return s.tk }

// Problems are the bundled problems the model recognises.
func (s *Server) Problems() []Problem { return Problems() }

// Stats is a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.Requests = make(map[string]int64, len(s.stats.Requests))
	for k, v := range s.stats.Requests {
		out.Requests[k] = v
	}
	return out
}

// Close stops accepting requests, ends in-flight sequences (finish reason abort), waits for
// every handler and hijacked connection, frees the port and removes a temporary model
// directory. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		err = s.srv.Shutdown()
		// Shutdown only closes listeners Serve has registered; closing ours as well covers
		// a Serve goroutine that has not reached that point yet.
		_ = s.ln.Close()
		<-s.served
		// fasthttp's idle-worker cleaner outlives Shutdown by up to its sleep (10 s) and
		// holds the fasthttp.Server; unhooking our handler keeps it from holding this
		// server too (vocabulary, prefix cache, tokenizer: ~0.2 MB per start/close).
		// Nothing calls the handler any more: Shutdown has closed every connection.
		s.srv.Handler = nil
		s.hjMu.Lock()
		s.closed = true
		for s.hjActive > 0 {
			s.hjCond.Wait()
		}
		s.hjMu.Unlock()
		if cerr := s.tk.Close(); err == nil {
			err = cerr
		}
		if s.ownDir {
			if rerr := sharedDir.release(); err == nil {
				err = rerr
			}
		}
		if err != nil {
			err = status.Wrap(status.Internal, err, "sim: closing the server")
		}
	})
	return err
}

// hijack runs fn on the raw connection once the handler returns, tracked so Close waits.
func (s *Server) hijack(ctx *fasthttp.RequestCtx, fn func(c net.Conn)) {
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		s.hjMu.Lock()
		if s.closed {
			s.hjMu.Unlock()
			return
		}
		s.hjActive++
		s.hjMu.Unlock()
		defer func() {
			s.hjMu.Lock()
			s.hjActive--
			s.hjCond.Broadcast()
			s.hjMu.Unlock()
		}()
		fn(c)
	})
}

// reply is a handler's answer.
type reply struct {
	status      int
	body        []byte
	retryAfter  int
	contentType string // "" = application/json
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	s.mu.Lock()
	s.stats.Requests[path]++
	epoch := s.abortEpoch
	s.mu.Unlock()
	fam := familyOf(path)
	if w := s.cfg.Warmup.D(); w > 0 && time.Since(s.started) < w {
		s.send(ctx, s.errorReply(fam, 503, "The server is starting up.", "server_error", nil))
		return
	}
	f := s.takeFault(path)
	if f != nil {
		switch f.Kind {
		case FaultHTTPError:
			r := s.errorReply(fam, f.Status, faultMessage(f.Status), "server_error", nil)
			if fam == famSGLang && (f.Status == 429 || f.Status == 408) {
				r.body = nil // the SGLang router answers these status-only
			}
			r.retryAfter = f.RetryAfter
			s.send(ctx, r)
			return
		case FaultCloseConnection:
			s.hijack(ctx, func(net.Conn) {})
			return
		case FaultHang:
			s.hijack(ctx, func(c net.Conn) {
				gone := make(chan struct{})
				go func() { _, _ = io.Copy(io.Discard, c); close(gone) }()
				select {
				case <-gone:
				case <-s.closing:
				}
				// fasthttp's hijacked conn ignores Close until the handler returns; a past
				// read deadline is what unblocks the reader.
				_ = c.SetReadDeadline(time.Unix(1, 0))
				<-gone
			})
			return
		case FaultSlow:
			t := time.NewTimer(f.Delay.D())
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
			}
		}
	}
	r := s.route(ctx, path, f, epoch)
	if f != nil && r.status == 200 {
		switch f.Kind {
		case FaultMalformedJSON:
			r.body = r.body[:len(r.body)/2]
		case FaultTruncatedBody:
			body := r.body
			s.hijack(ctx, func(c net.Conn) {
				head := "HTTP/1.1 200 OK\r\nServer: focus-sim\r\nContent-Type: application/json\r\nContent-Length: " +
					itoa(len(body)) + "\r\n\r\n"
				_, _ = c.Write(append([]byte(head), body[:len(body)/2]...))
			})
			return
		}
	}
	s.send(ctx, r)
}

func (s *Server) send(ctx *fasthttp.RequestCtx, r reply) {
	if r.status >= 400 {
		s.mu.Lock()
		s.stats.Errors++
		s.mu.Unlock()
	}
	ctx.SetStatusCode(r.status)
	if r.retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", itoa(r.retryAfter))
	}
	if len(r.body) > 0 {
		ctx.SetContentType(cmp.Or(r.contentType, "application/json"))
		ctx.Response.SetBodyRaw(r.body) // bodies are built per reply and never changed: no copy
	}
}

func faultMessage(code int) string {
	switch code {
	case 429:
		return "Rate limit exceeded. Please retry after a while."
	case 503:
		return "The server is temporarily unavailable."
	case 408:
		return "Request timed out in the queue."
	}
	return "Internal server error."
}

// route answers one request; epoch is the abort epoch it arrived in.
func (s *Server) route(ctx *fasthttp.RequestCtx, path string, f *Fault, epoch uint64) reply {
	method := string(ctx.Method())
	get := func(fn func() reply) reply {
		if method != "GET" {
			return jsonReply(405, map[string]any{"detail": "Method Not Allowed"})
		}
		return fn()
	}
	post := func(fn func([]byte, *Fault, uint64) reply) reply {
		if method != "POST" {
			return jsonReply(405, map[string]any{"detail": "Method Not Allowed"})
		}
		return fn(ctx.PostBody(), f, epoch)
	}
	switch path {
	case "/health", "/health_generate":
		return get(func() reply { return reply{status: 200} })
	case "/version":
		return get(func() reply { return jsonReply(200, map[string]any{"version": s.cfg.VLLMVersion}) })
	case "/v1/models":
		return get(s.models)
	case "/get_model_info", "/model_info":
		return get(s.modelInfo)
	case "/get_server_info", "/server_info":
		return get(s.serverInfo)
	case "/v1/loads":
		return get(s.loads)
	case "/flush_cache":
		s.cache.flush()
		return reply{status: 200, body: []byte("Cache flushed.\n")}
	case "/abort_request":
		return post(s.abortRequest)
	case "/generate":
		return post(s.generateHandler)
	case "/v1/completions":
		return post(s.completions)
	case "/v1/chat/completions":
		return post(s.chatCompletions)
	case "/v1/responses":
		return post(s.responses)
	}
	return jsonReply(404, map[string]any{"detail": "Not Found"})
}

// seqReq is one sequence to generate.
type seqReq struct {
	prompt []uint32
	s      sampling
	mode   toolMode
	rid    string
	fault  *Fault
	epoch  uint64 // the abort epoch the request arrived in
}

// errQueueFull is returned when MaxQueued sequences already wait.
var errQueueFull = status.Errorf(status.Backend, "The request queue is full.")

// runAll generates the sequences concurrently (a batch is scheduled like separate requests).
func (s *Server) runAll(reqs []seqReq) ([]genResult, error) {
	out := make([]genResult, len(reqs))
	errs := make([]error, len(reqs))
	if len(reqs) == 1 {
		out[0], errs[0] = s.run(reqs[0])
	} else {
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i], errs[i] = s.run(reqs[i])
			}()
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run schedules and generates one sequence: queue for a slot, look up the prefix cache,
// generate, play the latency model back (abortable), store the sequence in the cache.
func (s *Server) run(r seqReq) (genResult, error) {
	fl := &flight{rid: r.rid, abort: make(chan struct{}), epoch: r.epoch}
	s.mu.Lock()
	s.flights[fl] = struct{}{}
	if fl.epoch < s.abortEpoch {
		fl.stop() // an abort_all came between the request's arrival and now
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.flights, fl)
		s.mu.Unlock()
	}()
	lat := s.cfg.Latency
	aborted := ""
	if s.slots != nil {
		if lat.MaxQueued > 0 && s.waiting.Load() >= int64(lat.MaxQueued) {
			return genResult{}, errQueueFull
		}
		s.waiting.Add(1)
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-fl.abort:
			aborted = "Abort in waiting queue."
		case <-s.closing:
			aborted = "The server is shutting down."
		}
		s.waiting.Add(-1)
	}
	s.mu.Lock()
	s.running++
	fl.running = true
	s.stats.PeakRunning = max(s.stats.PeakRunning, s.running)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}()
	cached, mark := 0, noMark
	if !s.cfg.Cache.Disabled && len(r.prompt) > 0 {
		var k int
		k, mark = s.cache.match(r.prompt)
		cached = min(k, len(r.prompt)-1)
		if s.cfg.Cache.InsertOnPrefill && aborted == "" && k < len(r.prompt) {
			s.cache.insert(r.prompt, nil, mark)
		}
	}
	var res genResult
	if aborted == "" {
		if r.fault != nil && r.fault.Kind == FaultExtraTokens {
			r.s.overrun = max(1, r.fault.Tokens)
		}
		res = s.model.generate(r.prompt, r.s, r.mode)
		if r.fault != nil && r.fault.Kind == FaultAbort {
			res.truncate(len(res.ids) / 2)
			res.finish, res.abortMsg = "abort", "Abort in the middle of the request (injected fault)."
		}
		if emitted, why := s.playback(len(r.prompt)-cached, len(res.ids), fl); why != "" {
			res.truncate(emitted)
			res.finish, res.abortMsg = "abort", why
		}
	} else {
		res = genResult{finish: "abort", abortMsg: aborted, matchedID: -1}
	}
	res.cached, res.promptLen = cached, len(r.prompt)
	if !s.cfg.Cache.Disabled {
		s.cache.insert(r.prompt, res.ids, mark)
	}
	s.mu.Lock()
	s.stats.Sequences++
	s.stats.PromptTokens += int64(len(r.prompt))
	s.stats.CachedTokens += int64(cached)
	s.stats.GeneratedTokens += int64(len(res.ids))
	if res.finish == "abort" {
		s.stats.Aborted++
	}
	s.mu.Unlock()
	return res, nil
}

// truncate keeps the first n tokens (an abort keeps its partial output).
func (g *genResult) truncate(n int) {
	if n >= len(g.ids) {
		return
	}
	g.ids, g.lps = g.ids[:n], g.lps[:n]
	if g.tops != nil {
		g.tops = g.tops[:n]
	}
	g.matchedID, g.hasStr, g.matchedStr = -1, false, ""
}

// playback waits out the latency model; it returns how many tokens were out when an
// abort or Close cut it short (and why), or n and "".
func (s *Server) playback(uncached, n int, fl *flight) (int, string) {
	lat := s.cfg.Latency
	first := lat.FirstToken.D() + time.Duration(uncached)*lat.PrefillPerToken.D()
	if first == 0 && lat.PerToken == 0 {
		select {
		case <-fl.abort:
			return 0, "Abort before prefill."
		default:
			return n, ""
		}
	}
	// One timer for the whole response: a timer per token would drift by the timer slack
	// of every token (often far more than a sub-millisecond per-token time).
	begin := time.Now()
	total := first
	if n > 1 {
		total += time.Duration(n-1) * lat.PerToken.D()
	}
	t := time.NewTimer(total)
	defer t.Stop()
	// emitted is how many tokens had been generated by now, for a response cut short.
	emitted := func() int {
		since := time.Since(begin) - first
		if since < 0 {
			return 0
		}
		if lat.PerToken == 0 {
			return n
		}
		return min(n, 1+int(since/lat.PerToken.D()))
	}
	select {
	case <-t.C:
		return n, ""
	case <-fl.abort:
		return emitted(), "Abort by /abort_request."
	case <-s.closing:
		return emitted(), "The server is shutting down."
	}
}

func (s *Server) abortRequest(body []byte, _ *Fault, _ uint64) reply {
	var req struct {
		RID      string `json:"rid"`
		AbortAll bool   `json:"abort_all"`
	}
	if err := jsonx.Unmarshal(body, &req); err != nil {
		return validationReply("body", "JSON decode error: "+err.Error())
	}
	s.mu.Lock()
	if req.AbortAll {
		s.abortEpoch++
	}
	for fl := range s.flights {
		if req.AbortAll || (req.RID != "" && fl.rid == req.RID) {
			fl.stop()
		}
	}
	s.mu.Unlock()
	return reply{status: 200}
}

// nextSeed is the seed of a request that brought none: server seed + request counter.
func (s *Server) nextSeed() uint64 {
	return uint64(s.cfg.Seed) + s.requestSeq.Add(1)
}

// checkIDs rejects token ids outside the vocabulary.
func (s *Server) checkIDs(ids []uint32) error {
	n := uint32(s.model.v.size())
	for _, id := range ids {
		if id >= n {
			return status.Errorf(status.InvalidArgument, "Token id %d is out of vocabulary (vocab size %d).", id, n)
		}
	}
	return nil
}

// encode tokenizes text (no special-token post-processing, as chat prompts are rendered
// with their specials as text).
func (s *Server) encode(text string) ([]uint32, error) {
	return s.tk.Encode(text, false)
}

// decode is the detokenizer: bytes joined, invalid UTF-8 replaced.
func (s *Server) decode(ids []uint32, skipSpecial bool) string {
	return s.model.v.text(ids, skipSpecial)
}

// tokenString is how one token reads in logprob listings.
func (s *Server) tokenString(id uint32) string {
	return strings.ToValidUTF8(string(s.model.v.tokens[id]), "\uFFFD")
}

// modelDir is the generated model directory the simulators of a process share: made by
// the first that needs it, removed when the last of them closes.
type modelDir struct {
	mu    sync.Mutex
	users int
	root  string // <tmp>/focus-sim-NNN
}

var sharedDir modelDir

func (d *modelDir) acquire() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users == 0 {
		root, err := os.MkdirTemp("", "focus-sim-")
		if err != nil {
			return "", status.Wrap(status.Internal, err, "sim: creating a temporary model directory")
		}
		dir := filepath.Join(root, "focus-sim-model")
		if err := os.Mkdir(dir, 0o755); err != nil {
			os.RemoveAll(root)
			return "", status.Wrap(status.Internal, err, "sim: creating a temporary model directory")
		}
		if err := writeModelDir(dir); err != nil {
			os.RemoveAll(root)
			return "", err
		}
		d.root = root
	}
	d.users++
	return filepath.Join(d.root, "focus-sim-model"), nil
}

func (d *modelDir) release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users--; d.users > 0 {
		return nil
	}
	root := d.root
	d.root = ""
	return os.RemoveAll(root)
}
