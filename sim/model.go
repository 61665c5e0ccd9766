package sim

import (
	"bytes"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// model is the simulated language model over one vocabulary.
type model struct {
	v       *vocab
	think   bool
	toolErr float64
	verb    int // Config.Verbosity
	shared  atomic.Pointer[scriptTree]
}

// toolMode is what the request says about tool calls (OpenAI tool_choice).
type toolMode struct {
	never bool   // tool_choice "none": answer in text
	force bool   // "required" or a named function: call a tool now
	name  string // the forced function, if named
}

// assistantMarkers open an assistant turn in the chat formats the model understands.
var assistantMarkers = [][]byte{[]byte("<|im_start|>assistant\n"), []byte("<|start_header_id|>assistant<|end_header_id|>\n\n")}

// start reads a prompt (its bytes, specials as their text) and returns the cursor after it:
// which problem the conversation is about, whether this turn calls a tool, and how far into
// its answer the assistant already is.
func (m *model) start(prompt []byte, mode toolMode) (*cursor, *problemDef) {
	t := m.tree()
	ctx, g, anchored := []byte(nil), prompt, false
	best := -1
	for _, mk := range assistantMarkers {
		if i := bytes.LastIndex(prompt, mk); i > best {
			best = i
			ctx, g, anchored = prompt[:i], prompt[i+len(mk):], true
		}
	}
	var info *ctxInfo
	if anchored {
		info = t.context(ctx)
	} else {
		// A raw completion prompt: the answer starts right after the problem text.
		var def *problemDef
		end := -1
		for _, d := range bundled() {
			if i := bytes.LastIndex(prompt, []byte(d.Prompt)); i >= 0 && i+len(d.Prompt) > end {
				end, def = i+len(d.Prompt), d
			}
		}
		if end >= 0 {
			ctx, g = prompt[:end], prompt[end:]
		}
		info = t.analyze(ctx, def, false)
	}
	def := info.def
	root := t.root(rootKey{def: def, kind: kindSolve}, func() *sstate {
		return &sstate{def: def, slip: -1, think: m.think, intro: true, verb: m.verb}
	})
	if tools := info.tools; !mode.never && (mode.force || len(tools) > 0) {
		if mode.force || !info.toolResult {
			ts := toolSpec{name: mode.name}
			if len(tools) > 0 {
				ts = tools[0]
				for _, x := range tools {
					if x.name == mode.name {
						ts = x
					}
				}
			}
			if ts.name == "" {
				ts.name = "calculator"
			}
			calls := [2]string{toolCallText(ts.name, ts.param, def.Expression, false), toolCallText(ts.name, ts.param, def.Expression, true)}
			root = t.root(rootKey{def: def, kind: kindTool, tool: calls}, func() *sstate {
				return &sstate{def: def, kind: kindTool, slip: -1, toolErr: m.toolErr, tool: calls}
			})
		}
	}
	wrap := t.root(rootKey{def: def, kind: kindWrap}, func() *sstate { return &sstate{def: def, kind: kindWrap, slip: -1} })
	c := newCursor(root, wrap)
	if !anchored && len(ctx) == 0 {
		c.wrapped, c.started = true, true
		c.pos = expand(c.wrap, 1, nil)
	}
	c.feed(g)
	return c, def
}

// findProblem is the bundled problem whose text occurs last in the context.
func findProblem(ctx []byte) *problemDef {
	var def *problemDef
	end := -1
	for _, d := range bundled() {
		if i := bytes.LastIndex(ctx, []byte(d.Prompt)); i >= 0 && i+len(d.Prompt) > end {
			end, def = i+len(d.Prompt), d
		}
	}
	return def
}

// sampling is one sequence's decoding parameters, already defaulted and validated.
type sampling struct {
	maxTokens   int
	temperature float64
	topP        float64
	topK        int // ≤0: off
	minP        float64
	seed        uint64
	stopIDs     []uint32
	stopStrs    []string
	ignoreEOS   bool
	minTokens   int
	topN        int  // top logprobs to keep per position
	raw         bool // report raw instead of processed logprobs
	overrun     int  // fault: tokens to write beyond maxTokens
}

// genResult is one generated sequence.
type genResult struct {
	ids    []uint32
	lps    []float64
	tops   [][]cand // per position, top candidates by reported probability (when topN > 0)
	finish string   // "stop", "length" or "abort"
	// matchedID is the EOS or stop token that ended the sequence (-1: none); matchedStr the
	// stop string (hasStr).
	matchedID  int64
	matchedStr string
	hasStr     bool
	cached     int
	promptLen  int
	abortMsg   string
}

// generate writes one sequence. It is a pure function of (prompt, sampling, mode): the
// random draw for each position is keyed by the seed and a hash of every token before it,
// so a continuation from prompt+prefix with the same seed reproduces what one longer
// request would have written.
func (m *model) generate(prompt []uint32, s sampling, mode toolMode) genResult {
	buf := promptBufs.Get().(*[]byte)
	*buf = m.v.appendBytes((*buf)[:0], prompt, false)
	cur, _ := m.start(*buf, mode)
	promptBufs.Put(buf) // start keeps nothing of the prompt's bytes
	h := uint64(14695981039346656037)
	for _, id := range prompt {
		h = mixToken(h, id)
	}
	seedMix := splitmix(s.seed ^ 0x5851f42d4c957f2d)
	limit := s.maxTokens + s.overrun
	res := genResult{matchedID: -1, finish: "length", promptLen: len(prompt)}
	if c := min(max(limit, 0), 1024); c > 0 {
		res.ids, res.lps = make([]uint32, 0, c), make([]float64, 0, c)
	}
	var cands []cand
	var probs, report []float64
	var memo mathMemo
	var out []byte // generated non-special bytes, for stop strings
	for len(res.ids) < limit {
		cands = cur.candidates(m.v, cands)
		u := float64(splitmix(seedMix^h)>>11) / (1 << 53)
		probs, report = distribution(cands, s, probs, report, &memo)
		k := drawIndex(probs, u)
		id := cands[k].id
		res.ids = append(res.ids, id)
		res.lps = append(res.lps, memo.clampLog(report[k]))
		if s.topN > 0 {
			res.tops = append(res.tops, topCands(cands, report, s.topN))
		}
		h = mixToken(h, id)
		cur.feed(m.v.tokens[id])
		n := len(res.ids)
		if id == m.v.eos && !s.ignoreEOS && n >= s.minTokens {
			res.finish, res.matchedID = "stop", int64(id)
			break
		}
		if containsID(s.stopIDs, id) && n >= s.minTokens {
			res.finish, res.matchedID = "stop", int64(id)
			break
		}
		if !m.v.special[id] && len(s.stopStrs) > 0 {
			tb := m.v.tokens[id]
			out = append(out, tb...)
			if str, ok := matchStop(out, len(tb), s.stopStrs); ok && n >= s.minTokens {
				res.finish, res.matchedStr, res.hasStr = "stop", str, true
				break
			}
		}
	}
	return res
}

// promptBufs recycles the decoded prompt bytes of generate.
var promptBufs = sync.Pool{New: func() any { return new([]byte) }}

func mixToken(h uint64, id uint32) uint64 {
	h ^= uint64(id) + 0x9e3779b97f4a7c15
	return splitmix(h)
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// matchStop finds a stop string that ends inside the last added bytes.
func matchStop(out []byte, added int, stops []string) (string, bool) {
	for _, st := range stops {
		if st == "" {
			continue
		}
		from := max(0, len(out)-added-len(st)+1)
		if bytes.Contains(out[from:], []byte(st)) {
			return st, true
		}
	}
	return "", false
}

// mathMemo remembers the logs and powers of one sequence. A sequence meets only a few
// distinct probabilities (a live line proposes the same pair of tokens many times over),
// and math.Log and math.Exp were a fifth of the server's time; results are bit for bit
// those of the functions.
type mathMemo struct {
	pow, log memoTable
}

type memoTable struct {
	key [64]uint64
	val [64]float64
	ok  [64]bool
}

func (t *memoTable) get(x float64, f func(float64) float64) float64 {
	bits := math.Float64bits(x)
	i := (bits * 0x9e3779b97f4a7c15) >> 58
	if t.ok[i] && t.key[i] == bits {
		return t.val[i]
	}
	v := f(x)
	t.key[i], t.val[i], t.ok[i] = bits, v, true
	return v
}

// temper is math.Exp(math.Log(p) / temperature) (the temperature is fixed per sequence).
func (m *mathMemo) temper(p, temperature float64) float64 {
	return m.pow.get(p, func(p float64) float64 { return math.Exp(math.Log(p) / temperature) })
}

func (m *mathMemo) clampLog(p float64) float64 { return m.log.get(p, clampLog) }

// logFloor is where reported logprobs are clamped: vLLM's OpenAI shapes write -inf (and
// NaN) as -9999.0 (vllm 0.33.0 entrypoints/openai/completion/serving.py); the SGLang API
// writes a floored value as null, as its orjson writes -inf. No positive probability has a
// log this small, so the floor stands for exactly p = 0.
const logFloor = -9999.0

func clampLog(p float64) float64 {
	if p <= 0 {
		return logFloor
	}
	return math.Max(logFloor, math.Log(p))
}

// distribution turns the model's candidates into the sampling distribution (temperature,
// top-k, top-p, min-p, renormalised) and the distribution whose log-probabilities are
// reported (the same, or the raw model distribution).
func distribution(cands []cand, s sampling, probs, report []float64, memo *mathMemo) ([]float64, []float64) {
	probs, report = probs[:0], report[:0]
	for _, c := range cands {
		probs = append(probs, c.p)
	}
	if s.temperature == 0 {
		best := 0
		for i, c := range cands {
			if c.p > cands[best].p {
				best = i
			}
		}
		for i := range probs {
			report = append(report, cands[i].p)
			probs[i] = 0
		}
		probs[best] = 1
		return probs, report
	}
	for i, p := range probs {
		probs[i] = memo.temper(p, s.temperature)
	}
	normalize(probs)
	// order ranks candidates by probability, ties in candidate order (a stable sort; an
	// insertion sort over the handful of candidates, without sort.SliceStable's allocations)
	var buf [8]int
	order := buf[:0]
	if len(probs) > len(buf) {
		order = make([]int, 0, len(probs))
	}
	for i := range probs {
		order = append(order, i)
		for j := len(order) - 1; j > 0 && probs[order[j]] > probs[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	if s.topK > 0 && s.topK < len(order) {
		for _, i := range order[s.topK:] {
			probs[i] = 0
		}
	}
	if s.topP < 1 {
		cum := 0.0
		for rank, i := range order {
			if cum >= s.topP && rank > 0 {
				probs[i] = 0
			}
			cum += probs[i]
		}
	}
	if s.minP > 0 {
		top := probs[order[0]]
		for i := range probs {
			if probs[i] < s.minP*top {
				probs[i] = 0
			}
		}
	}
	normalize(probs)
	for i := range probs {
		if s.raw {
			report = append(report, cands[i].p)
		} else {
			report = append(report, probs[i])
		}
	}
	return probs, report
}

func normalize(ps []float64) {
	t := 0.0
	for _, p := range ps {
		t += p
	}
	if t > 0 {
		for i := range ps {
			ps[i] /= t
		}
	}
}

func drawIndex(probs []float64, u float64) int {
	last := 0
	for i, p := range probs {
		if p <= 0 {
			continue
		}
		last = i
		if u < p {
			return i
		}
		u -= p
	}
	return last
}

// topCands is the n most likely candidates under the reported distribution (ties by id).
func topCands(cands []cand, report []float64, n int) []cand {
	out := make([]cand, len(cands))
	for i, c := range cands {
		out[i] = cand{id: c.id, p: report[i]}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].p > out[b].p })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// promptLogprobs scores a prompt as the servers' prompt logprobs do: for each position
// i ≥ 1, the log-probability of prompt[i] under the model's own (raw) next-token
// distribution given prompt[:i], the one a request with prompt[:i] would draw from, and
// the n most likely candidates there (nil when n is 0). A token the model gives no mass
// is -Inf (each API writes it its own way); position 0 has no logprob (NaN).
func (m *model) promptLogprobs(prompt []uint32, n int) ([]float64, [][]cand) {
	lps := make([]float64, len(prompt))
	var tops [][]cand
	if n > 0 {
		tops = make([][]cand, len(prompt))
	}
	if len(prompt) > 0 {
		lps[0] = math.NaN()
	}
	var buf []byte
	var cands []cand
	var report []float64
	for i := 1; i < len(prompt); i++ {
		buf = m.v.appendBytes(buf[:0], prompt[:i], false)
		cur, _ := m.start(buf, toolMode{})
		cands = cur.candidates(m.v, cands)
		lps[i] = math.Inf(-1)
		report = report[:0]
		for _, c := range cands {
			report = append(report, c.p)
			if c.id == prompt[i] && c.p > 0 {
				lps[i] = math.Log(c.p)
			}
		}
		if n > 0 {
			tops[i] = topCands(cands, report, n)
		}
	}
	return lps, tops
}
