package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
)

// Verbose solutions (Config.Verbosity > 0). Real reasoning models write 500-3000 tokens for
// a math problem; the plain script writes about a hundred, so a search that cuts generation
// into 256-token segments would never branch. A verbose solution follows the same script
// machinery (branches with probabilities, one cursor, continuation-consistent) with more
// lines per step, and more of them are places where the model can slip or catch a slip:
//
//	level 1: the problem restated, the approach, "Step k of n" before each step, a summary.
//	         Slips and rechecks exactly as at level 0 (one chance per step).
//	level 2: + long arithmetic: a multi-digit operand is split by place value and every
//	         partial result is its own line, each wrong with Difficulty × verboseSlipScale
//	         (at most maxLineSlip), rechecked on the next line with verboseRecheck;
//	         + a double-check after each step: an exact inverse (exactCheckProb; catches a
//	         wrong result) or a rough estimate (misses it).
//	level 3: + why-sentences and transitions, + an independent verification of the whole
//	         expression before the summary, which may catch a wrong answer.
//
// A slip stays in the written values (later lines use it) until a recheck, a double-check
// or the verification fixes it, so a checkpoint's value depends on what its prefix holds:
// before any slip, after an uncaught slip that a later check may still catch, after every
// check has passed it by. The constants put the bundled problems at level 3 between about
// 0.9 (easiest) and 0.45-0.55 (hardest) success at temperature 1, a little below level 0,
// where the hardest are near 0.6: more places to slip, partly offset by the checks.

// MaxVerbosity is the largest Config.Verbosity.
const MaxVerbosity = 3

const (
	verboseSlipScale = 1.2  // per-line slip probability relative to Difficulty at level ≥ 2
	verboseRecheck   = 0.15 // level ≥ 2: chance that the line after a slip rechecks it
	exactCheckProb   = 0.2  // the double-check undoes the step exactly (else estimates, missing slips)
	verifyCatchProb  = 0.2  // the final verification notices a wrong answer
	maxLineSlip      = 0.4  // no line is wrong more often than this (before careful halving)
)

// phase is where a verbose solution is, between two lines.
type phase uint8

const (
	phRestate  phase = iota // the restatement paragraph is next
	phAnnounce              // "Step k of n" for s.step
	phMicro                 // the next partial result of s.step (len(s.mvals) written so far)
	phResult                // the one-line result of s.step
	phCheck                 // the double-check of s.step
	phVerify                // the independent verification
	phSummary               // the summary
	phFinal                 // "Therefore, the answer is ..."
)

// slipNote is a line just written wrong: what a recheck on the next line restates.
type slipNote struct {
	a, b         float64
	op           byte
	right, wrong float64
	micro        bool // a partial result (mvals[idx]) rather than a step result (vals[idx])
	idx          int
}

// mop is one partial computation of a step; operands refer to earlier partial results.
type mop struct {
	op   byte
	x, y operand
	part float64 // the place-value part this line handles (0: a sum of partial products)
}

// clone copies the state with its own value slices, so branches never share them.
func (s *sstate) clone() *sstate {
	c := *s
	c.vals = append([]float64(nil), s.vals...)
	c.mvals = append([]float64(nil), s.mvals...)
	return &c
}

// slipProb is the chance that the next arithmetic line is wrong.
func (s *sstate) slipProb() float64 {
	p := s.def.Difficulty
	if s.verb >= 2 {
		p = math.Min(maxLineSlip, p*verboseSlipScale)
	}
	if s.careful {
		p /= 2
	}
	return p
}

// verbose is children() for a verbose solution after the opening line.
func (s *sstate) verbose() []branch {
	var out []branch
	rest := 1.0
	if n := s.bad; n != nil {
		pr := recoverProb
		if s.verb >= 2 {
			pr = verboseRecheck
		}
		fixed := s.clone()
		fixed.bad, fixed.careful = nil, true
		if n.micro {
			fixed.mvals[n.idx] = n.right
		} else {
			fixed.vals[n.idx] = n.right
		}
		out = append(out, branch{p: pr, next: fixed,
			text: fmt.Sprintf("Wait, let me recheck: %s %c %s = %s, not %s.\n", num(n.a), n.op, num(n.b), num(n.right), num(n.wrong))})
		rest -= pr
	}
	cont := *s
	cont.bad = nil
	for _, b := range cont.lines() {
		b.p *= rest
		out = append(out, b)
	}
	return pruneZero(out)
}

// lines are the ways to write the next line from a state with no pending recheck.
func (s *sstate) lines() []branch {
	d := s.def
	n := len(d.steps)
	switch s.ph {
	case phRestate:
		next := s.clone()
		next.ph = phAnnounce
		return variants(next, restatements(s)...)
	case phAnnounce:
		st := d.steps[s.step]
		a, b := st.a.value(s.vals), st.b.value(s.vals)
		plan := s.plan(st.op, a, b)
		next := s.clone()
		next.ph, next.mvals = phResult, nil
		if len(plan) > 1 {
			next.ph = phMicro
		}
		return variants(next, announcements(s, st, a, b, plan)...)
	case phMicro:
		st := d.steps[s.step]
		a, b := st.a.value(s.vals), st.b.value(s.vals)
		plan := s.plan(st.op, a, b)
		k := len(s.mvals)
		if k == len(plan) {
			r := s.mvals[k-1]
			next := s.clone()
			next.vals = append(next.vals, r)
			next.afterStep()
			return []branch{{p: 1, text: "Collecting the parts: " + lowerFirst(st.text(a, b, r)), next: next}}
		}
		m := plan[k]
		x, y := m.x.value(s.mvals), m.y.value(s.mvals)
		return s.slipBranches(m.op, x, y, k, true, func(r float64) string { return microText(s, st.op, m, k, x, y, r) })
	case phResult:
		st := d.steps[s.step]
		a, b := st.a.value(s.vals), st.b.value(s.vals)
		return s.slipBranches(st.op, a, b, s.step, false, func(r float64) string { return st.text(a, b, r) })
	case phCheck:
		return s.checks()
	case phVerify:
		return s.verifications()
	case phSummary:
		var parts []string
		for i, st := range d.steps {
			a, b := st.a.value(s.vals), st.b.value(s.vals)
			parts = append(parts, fmt.Sprintf("%s %c %s = %s", num(a), st.op, num(b), num(s.vals[i])))
		}
		next := s.clone()
		next.ph = phFinal
		chain := strings.Join(parts, ", then ")
		return variants(next,
			"\nTo summarize: "+chain+".\n",
			"\nSummary of the work: "+chain+". Every number above follows from the one before it.\n")
	default: // phFinal
		return []branch{{p: 1, text: strings.ReplaceAll(d.final, "{R}", num(s.vals[n-1]))}}
	}
}

// afterStep moves past the result of s.step: to its double-check, the next step, or the end.
func (s *sstate) afterStep() {
	if s.verb >= 2 {
		s.ph = phCheck
		return
	}
	s.nextStep()
}

func (s *sstate) nextStep() {
	s.step++
	s.mvals = nil
	switch {
	case s.step < len(s.def.steps):
		s.ph = phAnnounce
	case s.verb >= 3:
		s.ph = phVerify
	default:
		s.ph = phSummary
	}
}

// slipBranches writes one arithmetic line: right, or (with slipProb) off by a slip whose
// size is fixed per (problem, step, line), so a wrong line reads the same every time.
func (s *sstate) slipBranches(op byte, a, b float64, idx int, micro bool, text func(r float64) string) []branch {
	r := apply(op, a, b)
	store := func(st *sstate, v float64) {
		if micro {
			st.mvals = append(st.mvals, v)
			return
		}
		st.vals = append(st.vals, v)
		st.afterStep()
	}
	good := s.clone()
	store(good, r)
	p := s.slipProb()
	out := []branch{{p: 1 - p, text: text(r), next: good}}
	if p > 0 {
		line := 1000 + idx
		if micro {
			line = 16*s.step + idx + 1
		}
		wr := apply('+', r, s.slipDelta(line, r))
		bad := s.clone()
		store(bad, wr)
		bad.bad = &slipNote{a: a, b: b, op: op, right: r, wrong: wr, micro: micro, idx: idx}
		out = append(out, branch{p: p, text: text(wr), next: bad})
	}
	return out
}

// slipDelta is the error of a slipped line: a small multiple of the result's lowest
// non-zero place (109500 slips by hundreds, 15 by ones).
func (s *sstate) slipDelta(line int, right float64) float64 {
	h := fnv.New64a()
	h.Write([]byte(s.def.ID))
	x := splitmix(h.Sum64() ^ uint64(line+1)*0x9e3779b97f4a7c15)
	choices := []float64{1, -1, 2, 10, -10, -2}
	unit := 1.0
	if v := math.Abs(right); v == math.Trunc(v) && v >= 10 {
		for i := 0; i < 3 && math.Mod(v, unit*10) == 0; i++ {
			unit *= 10
		}
	}
	return choices[x%uint64(len(choices))] * unit
}

// plan splits a step into partial computations (level ≥ 2): a multi-digit operand by place
// value, one line per part, then the partial products summed. One entry: no split.
func (s *sstate) plan(op byte, a, b float64) []mop {
	one := []mop{{op: op, x: lit(a), y: lit(b)}}
	if s.verb < 2 {
		return one
	}
	switch op {
	case '*':
		x, parts := a, placeParts(b)
		if len(parts) < 2 {
			x, parts = b, placeParts(a)
		}
		if len(parts) < 2 {
			return one
		}
		var out []mop
		for _, p := range parts {
			out = append(out, mop{op: '*', x: lit(x), y: lit(p), part: p})
		}
		acc := ref(0)
		for i := 1; i < len(parts); i++ {
			out = append(out, mop{op: '+', x: acc, y: ref(i)})
			acc = ref(len(out) - 1)
		}
		return out
	case '+', '-':
		parts := placeParts(b)
		if len(parts) < 2 {
			return one
		}
		out := []mop{{op: op, x: lit(a), y: lit(parts[0]), part: parts[0]}}
		for i, p := range parts[1:] {
			out = append(out, mop{op: op, x: ref(i), y: lit(p), part: p})
		}
		return out
	}
	return one
}

// placeParts splits a positive integer into its non-zero place values, largest first
// (366 → 300, 60, 6); nil for anything else.
func placeParts(v float64) []float64 {
	if v <= 0 || v != math.Trunc(v) || v >= 1e9 {
		return nil
	}
	var out []float64
	for unit := 1.0; unit <= v; unit *= 10 {
		if d := math.Mod(math.Floor(v/unit), 10); d > 0 {
			out = append([]float64{d * unit}, out...)
		}
	}
	return out
}

// variants are equally likely phrasings of the same line, all leading to next.
func variants(next *sstate, texts ...string) []branch {
	out := make([]branch, len(texts))
	for i, t := range texts {
		out[i] = branch{p: 1 / float64(len(texts)), text: t, next: next}
	}
	return out
}

var kindGoal = map[string]string{
	"linear":     "the value of x that makes the equation true",
	"arithmetic": "the value of the expression, respecting the order of operations",
	"percent":    "a percentage of a number",
	"series":     "the sum of a run of consecutive integers",
	"word":       "how much change Maya gets back after paying",
	"geometry":   "the perimeter of the rectangle",
	"average":    "the mean of the four numbers",
	"system":     "the value of x that satisfies both equations at once",
	"generic":    "the result of the computation",
}

// restatements is the paragraph after the opening line, in two phrasings.
func restatements(s *sstate) []string {
	d := s.def
	goal := kindGoal[d.Kind]
	if goal == "" {
		goal = "the result of the computation"
	}
	given := ""
	if nums := numbersIn(d.Prompt); len(nums) > 0 {
		given = " The numbers given are " + joinAnd(nums) + "."
	}
	calcs := "one calculation"
	if len(d.steps) > 1 {
		calcs = strconv.Itoa(len(d.steps)) + " calculations"
	}
	check := ""
	if s.verb >= 2 {
		check = ", and I will check each result before moving on"
	}
	tail := "\n"
	if s.verb >= 3 {
		tail = "\nArithmetic slips are the usual way to get a problem like this wrong, so I will write out every intermediate result instead of doing anything in my head, and at the end I will verify the answer independently.\n"
	}
	plan := d.plan
	return []string{
		"\nLet me restate the problem to be sure I understand it. The question asks for " + goal + "." + given +
			"\nThe approach: " + plan + " That takes " + calcs + check + "." + tail,
		"\nFirst, what exactly is being asked? We need " + goal + "." + given +
			"\nMy plan: " + plan + " That is " + calcs + " in total" + check + "." + tail,
	}
}

var opVerb = map[byte]string{'+': "add %s and %s", '-': "subtract %[2]s from %[1]s", '*': "multiply %s by %s", '/': "divide %s by %s"}

var opWhy = map[byte]string{
	'+': "Adding one place value at a time keeps the carries under control.",
	'-': "Subtracting one place value at a time makes the borrows easy to follow.",
	'*': "Multiplying by one place value at a time keeps every partial product easy to check.",
	'/': "Dividing means finding the number that, multiplied by the divisor, gives back the dividend.",
}

// announcements introduce a step, in two phrasings.
func announcements(s *sstate, st step, a, b float64, plan []mop) []string {
	n := len(s.def.steps)
	what := fmt.Sprintf(opVerb[st.op], num(a), num(b))
	split := ""
	if len(plan) > 1 {
		var ps []string
		for _, m := range plan {
			if m.part != 0 {
				ps = append(ps, num(m.part))
			}
		}
		whole := b
		if st.op == '*' && len(placeParts(b)) < 2 {
			whole = a
		}
		split = fmt.Sprintf(" I will split %s by place value into %s and handle one part at a time.", num(whole), strings.Join(ps, " + "))
	}
	why, link := "", ""
	if s.verb >= 3 {
		why = " " + opWhy[st.op]
		if s.step > 0 {
			link = fmt.Sprintf(" This uses the result of step %d, so any mistake there would carry into it.", s.step)
		} else {
			link = " Everything after this builds on it, so it has to be right."
		}
	}
	title := fmt.Sprintf("\nStep %d of %d: I need to %s.", s.step+1, n, what)
	if s.step+1 == n && n > 1 {
		title = fmt.Sprintf("\nStep %d of %d, the last one: I need to %s.", s.step+1, n, what)
	}
	alt := fmt.Sprintf("\nNext, step %d of %d. Here I %s.", s.step+1, n, what)
	if s.step == 0 {
		alt = fmt.Sprintf("\nStarting with step 1 of %d. Here I %s.", n, what)
	}
	return []string{title + why + link + split + "\n", alt + split + why + link + "\n"}
}

// microText is one partial-result line.
func microText(s *sstate, stepOp byte, m mop, k int, x, y, r float64) string {
	line := fmt.Sprintf("%s %c %s = %s.\n", num(x), m.op, num(y), num(r))
	switch {
	case m.part != 0 && stepOp == '*':
		if s.verb >= 3 {
			return fmt.Sprintf("The part for %s: ", num(m.part)) + line
		}
		return line
	case m.part != 0 && k == 0:
		return fmt.Sprintf("%s %s first: ", map[byte]string{'+': "Adding", '-': "Subtracting"}[m.op], num(m.part)) + line
	case m.part != 0:
		return fmt.Sprintf("Then %s %s: ", map[byte]string{'+': "adding", '-': "subtracting"}[m.op], num(m.part)) + line
	case m.x.ref == 0:
		return "Adding the partial products: " + line
	default:
		return "Adding the next partial product: " + line
	}
}

// checks are the double-check of the step just written: an exact inverse, which confirms
// a right result and catches a wrong one (the step is then redone right), or a rough
// estimate, which confirms either.
func (s *sstate) checks() []branch {
	st := s.def.steps[s.step]
	a, b := st.a.value(s.vals), st.b.value(s.vals)
	r := s.vals[s.step]
	right := apply(st.op, a, b)
	next := s.clone()
	next.nextStep()
	var out []branch
	inv, invOp, ok := inverse(st.op, r, b)
	if ok {
		head := fmt.Sprintf("Let me double-check by undoing it: %s %c %s = %s", num(r), invOp, num(b), num(inv))
		switch {
		case r == right && inv == a:
			out = append(out, branch{p: exactCheckProb, text: head + ", which gives back " + num(a) + ". Good, that matches.\n", next: next})
		case r == right:
			out = append(out, branch{p: exactCheckProb, text: head + ", which is " + num(a) + " up to rounding. Good, that matches.\n", next: next})
		default:
			fixed := s.clone()
			fixed.vals[s.step] = right
			fixed.careful = true
			fixed.nextStep()
			out = append(out, branch{p: exactCheckProb, next: fixed, text: head + ", but it should give back " + num(a) +
				fmt.Sprintf(". That means I made a mistake. Redoing it carefully: %s %c %s = %s.\n", num(a), st.op, num(b), num(right))})
		}
	}
	ra, rb := roughly(a), roughly(b)
	est := apply(st.op, ra, rb)
	text := fmt.Sprintf("A quick sanity check: %s %c %s is roughly %s %c %s = %s, and %s is in that range, so it looks right.\n",
		num(a), st.op, num(b), num(ra), st.op, num(rb), num(est), num(r))
	if rb == 0 {
		text = fmt.Sprintf("A quick sanity check: %s has about the size I expected, so it looks right.\n", num(r))
	}
	p := 1.0
	if ok {
		p -= exactCheckProb
	}
	return append(out, branch{p: p, text: text, next: next})
}

// inverse undoes r = a op b given b: the value that should equal a.
func inverse(op byte, r, b float64) (float64, byte, bool) {
	switch op {
	case '+':
		return apply('-', r, b), '-', true
	case '-':
		return apply('+', r, b), '+', true
	case '*':
		return apply('/', r, b), '/', b != 0
	case '/':
		return apply('*', r, b), '*', true
	}
	return 0, 0, false
}

// roughly rounds to one significant figure (numbers under 10 stay as they are).
func roughly(v float64) float64 {
	if math.Abs(v) < 10 {
		return math.Round(v)
	}
	p := math.Pow(10, math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v/p) * p
}

// verifications evaluate the whole expression independently: they confirm a right answer,
// and catch a wrong one with verifyCatchProb (every value is then redone right).
func (s *sstate) verifications() []branch {
	d := s.def
	truth := d.truth()
	got := s.vals[len(s.vals)-1]
	ans := truth[len(truth)-1]
	head := "\nBefore I box the answer, let me verify it independently. The whole computation is " + d.Expression +
		", and evaluating it in one go gives "
	next := s.clone()
	next.ph = phSummary
	if got == ans {
		return []branch{{p: 1, text: head + num(ans) + ", which agrees with what I found. Good.\n", next: next}}
	}
	fixed := s.clone()
	fixed.vals = truth
	fixed.careful = true
	fixed.ph = phSummary
	var redo []string
	for i, st := range d.steps {
		redo = append(redo, fmt.Sprintf("%s %c %s = %s", num(st.a.value(truth)), st.op, num(st.b.value(truth)), num(truth[i])))
	}
	return []branch{
		{p: verifyCatchProb, next: fixed, text: head + num(ans) + ", which does not agree with " + num(got) +
			". So there is a slip somewhere above. Going back over the steps carefully: " + strings.Join(redo, ", then ") +
			". The correct result is " + num(ans) + ".\n"},
		{p: 1 - verifyCatchProb, next: next, text: head + num(got) + ", which agrees with what I found. Good.\n"},
	}
}

// truth is every step's right value.
func (d *problemDef) truth() []float64 {
	vals := make([]float64, 0, len(d.steps))
	for _, st := range d.steps {
		vals = append(vals, apply(st.op, st.a.value(vals), st.b.value(vals)))
	}
	return vals
}

// numbersIn lists the numbers written in a text, in order.
func numbersIn(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		if text[i] < '0' || text[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(text) && (text[j] >= '0' && text[j] <= '9' || text[j] == '.' && j+1 < len(text) && text[j+1] >= '0' && text[j+1] <= '9') {
			j++
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}

func joinAnd(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}
