package sim

import (
	"bytes"
	"hash/fnv"
	"math"
	"sort"
	"strings"
)

// model is the simulated language model over one vocabulary.
type model struct {
	v       *vocab
	think   bool
	toolErr float64
	verb    int // Config.Verbosity
}

// toolMode is what the request says about tool calls (OpenAI tool_choice).
type toolMode struct {
	never bool   // tool_choice "none": answer in text
	force bool   // "required" or a named function: call a tool now
	name  string // the forced function, if named
}

// assistantMarkers open an assistant turn in the chat formats the model understands.
var assistantMarkers = []string{"<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n"}

// start reads a prompt (its bytes, specials as their text) and returns the cursor after it:
// which problem the conversation is about, whether this turn calls a tool, and how far into
// its answer the assistant already is.
func (m *model) start(prompt string, mode toolMode) (*cursor, *problemDef) {
	ctx, g, anchored := "", prompt, false
	best := -1
	for _, mk := range assistantMarkers {
		if i := strings.LastIndex(prompt, mk); i > best {
			best = i
			ctx, g, anchored = prompt[:i], prompt[i+len(mk):], true
		}
	}
	def := findProblem(ctx)
	if !anchored {
		// A raw completion prompt: the answer starts right after the problem text.
		end := -1
		for _, d := range bundled() {
			if i := strings.LastIndex(prompt, d.Prompt); i >= 0 && i+len(d.Prompt) > end {
				end, def = i+len(d.Prompt), d
			}
		}
		if end >= 0 {
			ctx, g = prompt[:end], prompt[end:]
		}
	}
	if def == nil {
		if !anchored && ctx == "" {
			def = genericProblem(0) // nothing to anchor on: one fixed wrap-up answer
		} else {
			h := fnv.New64a()
			h.Write([]byte(ctx))
			def = genericProblem(h.Sum64())
		}
	}
	root := &sstate{def: def, slip: -1, think: m.think, intro: true, verb: m.verb}
	if tools := parseTools(ctx); !mode.never && (mode.force || len(tools) > 0) {
		lastUser := ctx
		if i := strings.LastIndex(ctx, "<|im_start|>user"); i >= 0 {
			lastUser = ctx[i:]
		}
		if mode.force || !strings.Contains(lastUser, "<tool_response>") {
			t := toolSpec{name: mode.name}
			if len(tools) > 0 {
				t = tools[0]
				for _, x := range tools {
					if x.name == mode.name {
						t = x
					}
				}
			}
			if t.name == "" {
				t.name = "calculator"
			}
			root = &sstate{def: def, kind: kindTool, slip: -1, toolErr: m.toolErr,
				tool: [2]string{toolCallText(t.name, t.param, def.Expression, false), toolCallText(t.name, t.param, def.Expression, true)}}
		}
	}
	c := newCursor(root, &sstate{def: def, kind: kindWrap, slip: -1})
	if !anchored && ctx == "" {
		c.wrapped, c.started = true, true
		c.pos = expand(c.wrap, 1, nil)
	}
	c.feed(g)
	return c, def
}

// findProblem is the bundled problem whose text occurs last in the context.
func findProblem(ctx string) *problemDef {
	var def *problemDef
	end := -1
	for _, d := range bundled() {
		if i := strings.LastIndex(ctx, d.Prompt); i >= 0 && i+len(d.Prompt) > end {
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
	cur, _ := m.start(string(m.v.appendBytes(nil, prompt, false)), mode)
	h := uint64(14695981039346656037)
	for _, id := range prompt {
		h = mixToken(h, id)
	}
	seedMix := splitmix(s.seed ^ 0x5851f42d4c957f2d)
	res := genResult{matchedID: -1, finish: "length", promptLen: len(prompt)}
	limit := s.maxTokens + s.overrun
	var cands []cand
	var probs, report []float64
	var out []byte // generated non-special bytes, for stop strings
	for len(res.ids) < limit {
		cands = cur.candidates(m.v, cands)
		u := float64(splitmix(seedMix^h)>>11) / (1 << 53)
		probs, report = distribution(cands, s, probs, report)
		k := drawIndex(probs, u)
		id := cands[k].id
		res.ids = append(res.ids, id)
		res.lps = append(res.lps, clampLog(report[k]))
		if s.topN > 0 {
			res.tops = append(res.tops, topCands(cands, report, s.topN))
		}
		h = mixToken(h, id)
		cur.feed(string(m.v.tokens[id]))
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

func clampLog(p float64) float64 {
	if p <= 0 {
		return -9999
	}
	return math.Max(-9999, math.Log(p))
}

// distribution turns the model's candidates into the sampling distribution (temperature,
// top-k, top-p, min-p, renormalised) and the distribution whose log-probabilities are
// reported (the same, or the raw model distribution).
func distribution(cands []cand, s sampling, probs, report []float64) ([]float64, []float64) {
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
		probs[i] = math.Exp(math.Log(p) / s.temperature)
	}
	normalize(probs)
	order := make([]int, len(probs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
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
