package sim

import (
	"fmt"
	"math"
	"strings"
)

// The model is a probabilistic script: a tree of text pieces (one solution line each) whose
// branches carry probabilities. A cursor tracks every script position consistent with the
// bytes written so far, so any prefix (the model's own output, cut anywhere, even inside a
// token) leads back to the same state, and the next-token distribution follows from the
// positions still alive.

type scriptKind uint8

const (
	kindSolve scriptKind = iota // a worked solution
	kindTool                    // one tool call, then EOS
	kindWrap                    // off-script: state an answer, then EOS
)

// altProb is the weight of a shorter (non-canonical) tokenization of the same text: real
// models put a little mass there, which keeps sampled logprobs below zero and lets tests
// see that token ids must never be re-derived from text.
const altProb = 0.03

// wrapWrongMax caps the chance of a wrong answer in the off-script wrap-up.
const wrapWrongMax = 0.5

// carefulProb is the chance of the careful opening line.
const carefulProb = 0.4

// sstate is the script state between two lines.
type sstate struct {
	def     *problemDef
	kind    scriptKind
	step    int       // next step
	think   bool      // the <think> block is still to come
	intro   bool      // the opening line is still to come
	vals    []float64 // step results as written (possibly wrong)
	slip    int       // step written wrong just before this point (-1: none); it may still be caught
	careful bool      // a slip was caught: later steps slip half as often
	tool    [2]string // kindTool: the well-formed and the malformed call
	toolErr float64
	// Verbose solutions (verbose.go); all zero at level 0.
	verb  int       // Config.Verbosity
	ph    phase     // where in the solution the next line is
	mvals []float64 // partial results of the current step as written
	bad   *slipNote // the line just written was wrong; the next may recheck it
	kids  *kidsCell // where the branches are memoised (nil: computed on every call)
}

// branch is one way to continue: text with probability p, then next (nil: EOS).
type branch struct {
	p    float64
	text string
	next *sstate
}

// branches computes children (see scriptTree).
func (s *sstate) branches() []branch {
	d := s.def
	switch s.kind {
	case kindTool:
		return pruneZero([]branch{{p: 1 - s.toolErr, text: s.tool[0]}, {p: s.toolErr, text: s.tool[1]}})
	case kindWrap:
		pw := math.Min(wrapWrongMax, 2*d.Difficulty)
		ans := apply('+', parseNum(d.Answer), d.deltas[len(d.deltas)-1])
		return pruneZero([]branch{
			{p: 1 - pw, text: "\n\n" + strings.ReplaceAll(d.final, "{R}", d.Answer)},
			{p: pw, text: "\n\n" + strings.ReplaceAll(d.final, "{R}", num(ans))},
		})
	}
	if s.think {
		next := *s
		next.think = false
		return []branch{{p: 1, text: "<think>\n" + d.plan + "\n</think>\n\n", next: &next}}
	}
	if s.intro {
		// Two openings; the careful one halves later slips, so the first line already
		// changes the success rate of everything after it.
		plain, careful := *s, *s
		plain.intro, careful.intro, careful.careful = false, false, true
		task := d.Prompt
		if task == "" {
			task = "a computation."
		}
		return []branch{
			{p: 1 - carefulProb, text: "We are asked: " + task + " Let me solve it step by step.\n", next: &plain},
			{p: carefulProb, text: "We are asked: " + task + " I will work carefully and double-check each calculation.\n", next: &careful},
		}
	}
	if s.verb > 0 {
		return s.verbose()
	}
	var out []branch
	rest := 1.0
	if s.slip >= 0 {
		st := d.steps[s.slip]
		a, b := st.a.value(s.vals), st.b.value(s.vals)
		right := apply(st.op, a, b)
		fixed := *s
		fixed.vals = append([]float64(nil), s.vals...)
		fixed.vals[s.slip] = right
		fixed.slip = -1
		fixed.careful = true
		out = append(out, branch{p: recoverProb,
			text: fmt.Sprintf("Wait, let me recheck: %s %c %s = %s, not %s.\n", num(a), st.op, num(b), num(right), num(s.vals[s.slip])),
			next: &fixed})
		rest -= recoverProb
	}
	if s.step == len(d.steps) {
		return append(out, branch{p: rest, text: strings.ReplaceAll(d.final, "{R}", num(s.vals[len(s.vals)-1]))})
	}
	p := d.Difficulty
	if s.careful {
		p /= 2
	}
	st := d.steps[s.step]
	a, b := st.a.value(s.vals), st.b.value(s.vals)
	r := apply(st.op, a, b)
	good := *s
	good.vals = append(s.vals[:len(s.vals):len(s.vals)], r)
	good.step++
	good.slip = -1
	out = append(out, branch{p: rest * (1 - p), text: st.text(a, b, r), next: &good})
	if p > 0 {
		wr := apply('+', r, d.deltas[s.step])
		bad := *s
		bad.vals = append(s.vals[:len(s.vals):len(s.vals)], wr)
		bad.step++
		bad.slip = s.step
		out = append(out, branch{p: rest * p, text: st.text(a, b, wr), next: &bad})
	}
	return out
}

func pruneZero(bs []branch) []branch {
	out := bs[:0]
	for _, b := range bs {
		if b.p > 0 {
			out = append(out, b)
		}
	}
	return out
}

func parseNum(s string) float64 {
	var v float64
	fmt.Sscan(s, &v)
	return v
}

// position is a point inside one branch's text; eos marks "the text is done, EOS is next".
type position struct {
	text string
	off  int
	w    float64
	next *sstate
	eos  bool
}

// expand turns a state into the start positions of its branches (weight w each, scaled).
func expand(s *sstate, w float64, out []position) []position {
	for _, b := range s.children() {
		out = appendPos(out, position{text: b.text, w: w * b.p, next: b.next})
	}
	return out
}

// appendPos adds p, expanding it at once when its text is already exhausted.
func appendPos(out []position, p position) []position {
	if p.off < len(p.text) || p.eos {
		return append(out, p)
	}
	if p.next == nil {
		return append(out, position{w: p.w, eos: true})
	}
	return expand(p.next, p.w, out)
}

// cursor follows the script through the bytes of the assistant's text.
type cursor struct {
	pos     []position
	spare   []position
	wrap    *sstate
	wrapped bool // the text left the script: the model only wraps up now
	started bool // a non-space byte has been consumed
}

func newCursor(root, wrap *sstate) *cursor {
	return &cursor{pos: expand(root, 1, nil), wrap: wrap}
}

// feed consumes text. It is the same function for a prompt's prefix and for the model's
// own tokens, which is what makes continuations consistent with their prefixes.
func (c *cursor) feed(text []byte) {
	for i := 0; i < len(text); {
		if k := c.run(text[i:]); k > 0 {
			i += k
			continue
		}
		c.feedByte(text[i])
		i++
	}
}

// run consumes in one step the longest start of text that every live position expects
// and none finishes (finishing expands, which feedByte does), and returns its length.
// Positions only move within their texts there, so their weights stay put, and
// normalising once is what normalising at every byte would do (after the first time
// the total is in range).
func (c *cursor) run(text []byte) int {
	if !c.started || len(c.pos) == 0 {
		return 0
	}
	k := len(text)
	for _, p := range c.pos {
		if p.eos {
			return 0
		}
		if k = commonPrefix(text[:k], p.text[p.off:len(p.text)-1]); k == 0 {
			return 0
		}
	}
	total := 0.0
	for i := range c.pos {
		c.pos[i].off += k
		total += c.pos[i].w
	}
	if total > 0 && (total < 1e-100 || total > 1e100) {
		for i := range c.pos {
			c.pos[i].w /= total
		}
	}
	return k
}

func (c *cursor) feedByte(b byte) {
	if !c.started && !c.wrapped && (b == ' ' || b == '\n' || b == '\t' || b == '\r') {
		return
	}
	c.started = true
	next := advance(c.pos, b, c.spare[:0])
	if len(next) == 0 {
		// Off the script (text the model would not write): restart the wrap-up at every
		// byte it does not continue, so the wrap-up's own output is recognised later.
		c.wrapped = true
		fresh := expand(c.wrap, 1, nil)
		next = advance(fresh, b, next)
		if len(next) == 0 {
			next = fresh
		}
	}
	c.spare, c.pos = c.pos, next
	total := 0.0
	for _, p := range c.pos {
		total += p.w
	}
	if total > 0 && (total < 1e-100 || total > 1e100) {
		for i := range c.pos {
			c.pos[i].w /= total
		}
	}
}

// commonPrefix is the length of the longest common start of a and b.
func commonPrefix(a []byte, b string) int {
	n := min(len(a), len(b))
	j := 0
	for j+16 <= n && string(a[j:j+16]) == b[j:j+16] { // a prompt's prefix runs for kilobytes
		j += 16
	}
	for j < n && a[j] == b[j] {
		j++
	}
	return j
}

func advance(pos []position, b byte, out []position) []position {
	for _, p := range pos {
		if p.eos || p.text[p.off] != b {
			continue
		}
		p.off++
		out = appendPos(out, p)
	}
	return out
}

// cand is one candidate next token with its (unnormalised, then normalised) probability.
type cand struct {
	id uint32
	p  float64
}

// candidates is the model's next-token distribution at the cursor, normalised, in a
// deterministic order (by id).
func (c *cursor) candidates(v *vocab, out []cand) []cand {
	out = out[:0]
	add := func(id uint32, p float64) {
		for i := range out {
			if out[i].id == id {
				out[i].p += p
				return
			}
		}
		out = append(out, cand{id: id, p: p})
	}
	for _, p := range c.pos {
		if p.eos {
			add(v.eos, p.w)
			continue
		}
		g, alt := v.match(p.text[p.off:])
		if alt >= 0 {
			add(uint32(g), p.w*(1-altProb))
			add(uint32(alt), p.w*altProb)
		} else {
			add(uint32(g), p.w)
		}
	}
	total := 0.0
	for _, x := range out {
		total += x.p
	}
	for i := range out {
		out[i].p /= total
	}
	// insertion sort by id: a handful of entries
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].id < out[j-1].id; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
