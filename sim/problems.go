package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"sync"
)

// Problem is one bundled math problem the simulated model knows how to solve. The model
// recognises it when Prompt occurs verbatim in the decoded prompt.
type Problem struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	// Label is the graded reference, `\boxed{ANSWER}`, what MathEnv compares against.
	Label string `json:"label"`
	// Answer is the bare answer inside Label.
	Answer string `json:"answer"`
	Kind   string `json:"kind"`
	// Difficulty is the probability that the model slips on any one arithmetic step at
	// temperature 1 (halved after it has caught and fixed a slip).
	Difficulty float64 `json:"difficulty"`
	// Steps is the number of arithmetic steps in a worked solution.
	Steps int `json:"steps"`
	// Expression is the whole computation as one formula, what the model passes to a tool.
	Expression string `json:"expression"`
}

// Step-level behaviour of the model; the package doc describes the process.
const (
	recoverProb = 0.3 // chance of catching a slip right after making it
	wrapWrong   = 0.5 // in the off-script wrap-up, weight of a wrong answer relative to Difficulty
)

// operand is a literal or the (as written) result of an earlier step.
type operand struct {
	ref int // index of an earlier step, or -1 for lit
	lit float64
}

func lit(v float64) operand { return operand{ref: -1, lit: v} }
func ref(i int) operand     { return operand{ref: i} }

// step is one line of a worked solution: say with {A}, {B}, {R} replaced by the operand
// values and the result.
type step struct {
	say  string
	op   byte
	a, b operand
}

// problemDef is a Problem plus the script the model follows for it.
type problemDef struct {
	Problem
	steps  []step
	final  string // with {R}
	plan   string // the <think> plan
	deltas []float64
}

func (o operand) value(vals []float64) float64 {
	if o.ref >= 0 {
		return vals[o.ref]
	}
	return o.lit
}

func apply(op byte, a, b float64) float64 {
	var r float64
	switch op {
	case '+':
		r = a + b
	case '-':
		r = a - b
	case '*':
		r = a * b
	case '/':
		r = a / b
	}
	return math.Round(r*100) / 100 // answers are written with at most two decimals
}

// num writes a value the way the model writes numbers: integers plainly, otherwise up to
// two decimals.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (s step) text(a, b, r float64) string {
	return strings.NewReplacer("{A}", num(a), "{B}", num(b), "{R}", num(r)).Replace(s.say)
}

// build finishes a definition: answer, label, expression, slip sizes.
func (d *problemDef) build() *problemDef {
	vals := make([]float64, len(d.steps))
	exprs := make([]string, len(d.steps))
	for i, s := range d.steps {
		vals[i] = apply(s.op, s.a.value(vals), s.b.value(vals))
		operandExpr := func(o operand) string {
			if o.ref >= 0 {
				return "(" + exprs[o.ref] + ")"
			}
			return num(o.lit)
		}
		exprs[i] = operandExpr(s.a) + " " + string(s.op) + " " + operandExpr(s.b)
	}
	d.Answer = num(vals[len(vals)-1])
	d.Label = `\boxed{` + d.Answer + `}`
	d.Steps = len(d.steps)
	d.Expression = exprs[len(exprs)-1]
	// Slip sizes are fixed per (problem, step) so that a wrong line reads the same every time.
	h := fnv.New64a()
	h.Write([]byte(d.ID))
	x := h.Sum64()
	choices := []float64{1, -1, 2, 10, -10, -2}
	d.deltas = make([]float64, len(d.steps))
	for i := range d.steps {
		x = splitmix(x)
		d.deltas[i] = choices[x%uint64(len(choices))]
	}
	return d
}

func digits(vs ...int) int {
	m := 0
	for _, v := range vs {
		if v < 0 {
			v = -v
		}
		if n := len(strconv.Itoa(v)); n > m {
			m = n
		}
	}
	return m
}

func difficulty(base float64, vs ...int) float64 {
	d := base + 0.06*float64(digits(vs...)-1)
	return math.Round(math.Min(0.6, math.Max(0.02, d))*1000) / 1000
}

const finalLine = "Therefore, the answer is \\boxed{{R}}.\n"

func linearPlus(a, b, x int) *problemDef {
	c := a*x + b
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("linear-%d-%d-%d", a, b, c), Kind: "linear",
			Prompt: fmt.Sprintf("Solve %dx + %d = %d.", a, b, c), Difficulty: difficulty(0.06, a, b, c)},
		steps: []step{
			{say: fmt.Sprintf("Subtract %d from both sides: %dx = {A} - {B} = {R}.\n", b, a), op: '-', a: lit(float64(c)), b: lit(float64(b))},
			{say: fmt.Sprintf("Divide both sides by %d: x = {A} / {B} = {R}.\n", a), op: '/', a: ref(0), b: lit(float64(a))},
		},
		final: finalLine, plan: "Isolate x: undo the addition first, then the multiplication.",
	}).build()
}

func linearMinus(a, b, x int) *problemDef {
	c := a*x - b
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("linear-%d-m%d-%d", a, b, c), Kind: "linear",
			Prompt: fmt.Sprintf("Solve %dx - %d = %d.", a, b, c), Difficulty: difficulty(0.08, a, b, c)},
		steps: []step{
			{say: fmt.Sprintf("Add %d to both sides: %dx = {A} + {B} = {R}.\n", b, a), op: '+', a: lit(float64(c)), b: lit(float64(b))},
			{say: fmt.Sprintf("Divide both sides by %d: x = {A} / {B} = {R}.\n", a), op: '/', a: ref(0), b: lit(float64(a))},
		},
		final: finalLine, plan: "Isolate x: undo the subtraction first, then the multiplication.",
	}).build()
}

func productSum(a, b, c int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("arith-%d-%d-%d", a, b, c), Kind: "arithmetic",
			Prompt: fmt.Sprintf("Compute %d * %d + %d.", a, b, c), Difficulty: difficulty(0.07, a, b)},
		steps: []step{
			{say: "First, multiply: {A} * {B} = {R}.\n", op: '*', a: lit(float64(a)), b: lit(float64(b))},
			{say: "Then add: {A} + {B} = {R}.\n", op: '+', a: ref(0), b: lit(float64(c))},
		},
		final: finalLine, plan: "Multiply before adding.",
	}).build()
}

func sumProduct(a, b, c int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("paren-%d-%d-%d", a, b, c), Kind: "arithmetic",
			Prompt: fmt.Sprintf("Compute (%d + %d) * %d.", a, b, c), Difficulty: difficulty(0.06, a+b, c)},
		steps: []step{
			{say: "First, the parentheses: {A} + {B} = {R}.\n", op: '+', a: lit(float64(a)), b: lit(float64(b))},
			{say: "Then multiply: {A} * {B} = {R}.\n", op: '*', a: ref(0), b: lit(float64(c))},
		},
		final: finalLine, plan: "Parentheses first, then the product.",
	}).build()
}

func percent(p, n int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("percent-%d-%d", p, n), Kind: "percent",
			Prompt: fmt.Sprintf("What is %d%% of %d?", p, n), Difficulty: difficulty(0.1, p, n)},
		steps: []step{
			{say: "Multiply: {A} * {B} = {R}.\n", op: '*', a: lit(float64(n)), b: lit(float64(p))},
			{say: "Divide by 100: {A} / {B} = {R}.\n", op: '/', a: ref(0), b: lit(100)},
		},
		final: finalLine, plan: "p percent of n is n * p / 100.",
	}).build()
}

func seriesSum(n int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("series-%d", n), Kind: "series",
			Prompt: fmt.Sprintf("Find the sum of the integers from 1 to %d.", n), Difficulty: difficulty(0.12, n*(n+1))},
		steps: []step{
			{say: fmt.Sprintf("Use n(n + 1) / 2 with n = %d: {A} * {B} = {R}.\n", n), op: '*', a: lit(float64(n)), b: lit(float64(n + 1))},
			{say: "Halve it: {A} / {B} = {R}.\n", op: '/', a: ref(0), b: lit(2)},
		},
		final: finalLine, plan: "Gauss: pair the terms, n(n + 1) / 2.",
	}).build()
}

func change(k, p, m int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("change-%d-%d-%d", k, p, m), Kind: "word",
			Prompt:     fmt.Sprintf("Maya buys %d pens at %d dollars each and pays with a %d dollar bill. How much change does she get, in dollars?", k, p, m),
			Difficulty: difficulty(0.1, k*p, m)},
		steps: []step{
			{say: "The pens cost {A} * {B} = {R} dollars.\n", op: '*', a: lit(float64(k)), b: lit(float64(p))},
			{say: "The change is {A} - {B} = {R} dollars.\n", op: '-', a: lit(float64(m)), b: ref(0)},
		},
		final: finalLine, plan: "Total cost first, then subtract it from the bill.",
	}).build()
}

func perimeter(l, w int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("perimeter-%d-%d", l, w), Kind: "geometry",
			Prompt: fmt.Sprintf("A rectangle is %d cm long and %d cm wide. What is its perimeter in cm?", l, w), Difficulty: difficulty(0.04, l, w)},
		steps: []step{
			{say: "Length plus width: {A} + {B} = {R}.\n", op: '+', a: lit(float64(l)), b: lit(float64(w))},
			{say: "The perimeter is twice that: {A} * {B} = {R}.\n", op: '*', a: ref(0), b: lit(2)},
		},
		final: finalLine, plan: "Perimeter is 2 * (length + width).",
	}).build()
}

func average(a, b, c, e int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("average-%d-%d-%d-%d", a, b, c, e), Kind: "average",
			Prompt: fmt.Sprintf("What is the average of %d, %d, %d and %d?", a, b, c, e), Difficulty: difficulty(0.08, a, b, c, e)},
		steps: []step{
			{say: "Add the first two: {A} + {B} = {R}.\n", op: '+', a: lit(float64(a)), b: lit(float64(b))},
			{say: "Add the third: {A} + {B} = {R}.\n", op: '+', a: ref(0), b: lit(float64(c))},
			{say: "Add the fourth: {A} + {B} = {R}.\n", op: '+', a: ref(1), b: lit(float64(e))},
			{say: "Divide by 4: {A} / {B} = {R}.\n", op: '/', a: ref(2), b: lit(4)},
		},
		final: finalLine, plan: "Sum the four numbers, then divide by 4.",
	}).build()
}

func system(x, y int) *problemDef {
	return (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("system-%d-%d", x, y), Kind: "system",
			Prompt: fmt.Sprintf("If x + y = %d and x - y = %d, what is x?", x+y, x-y), Difficulty: difficulty(0.09, x+y, x-y)},
		steps: []step{
			{say: "Adding the two equations gives 2x = {A} + {B} = {R}.\n", op: '+', a: lit(float64(x + y)), b: lit(float64(x - y))},
			{say: "So x = {A} / {B} = {R}.\n", op: '/', a: ref(0), b: lit(2)},
		},
		final: finalLine, plan: "Add the equations to eliminate y.",
	}).build()
}

var bundled = sync.OnceValue(func() []*problemDef {
	return []*problemDef{
		linearPlus(3, 7, 5), linearPlus(2, 9, 8), linearPlus(5, 4, 11), linearPlus(7, 13, 6),
		linearPlus(12, 35, 17), linearPlus(9, 148, 23), linearPlus(4, 3, 19), linearPlus(16, 257, 41),
		linearMinus(4, 6, 9), linearMinus(6, 15, 7), linearMinus(11, 24, 13), linearMinus(25, 140, 32),
		productSum(17, 23, 45), productSum(8, 9, 6), productSum(34, 56, 78), productSum(123, 45, 678),
		productSum(12, 12, 12), productSum(97, 86, 431),
		sumProduct(14, 9, 6), sumProduct(3, 4, 5), sumProduct(125, 375, 16), sumProduct(48, 77, 23),
		percent(15, 240), percent(25, 64), percent(35, 480), percent(12, 1250),
		seriesSum(10), seriesSum(40), seriesSum(100), seriesSum(365),
		change(14, 3, 50), change(6, 7, 100), change(23, 4, 100), change(17, 13, 500),
		perimeter(12, 7), perimeter(25, 18), perimeter(130, 85),
		average(12, 18, 25, 45), average(81, 94, 77, 88), average(120, 345, 567, 968),
		system(9, 3), system(27, 14), system(153, 68),
	}
})

// Problems are the bundled problems, in a fixed order.
func Problems() []Problem {
	defs := bundled()
	out := make([]Problem, len(defs))
	for i, d := range defs {
		out[i] = d.Problem
	}
	return out
}

// genericProblem is what the model solves when the prompt holds no bundled problem: a
// product-plus-sum whose numbers come from a hash of the context, so the same context
// always gets the same "random-looking" answer.
func genericProblem(h uint64) *problemDef {
	x := splitmix(h)
	a := 12 + int(x%88)
	x = splitmix(x)
	b := 3 + int(x%17)
	x = splitmix(x)
	c := 10 + int(x%990)
	d := (&problemDef{
		Problem: Problem{ID: fmt.Sprintf("generic-%d-%d-%d", a, b, c), Kind: "generic", Difficulty: 0.25},
		steps: []step{
			{say: "Let me set up the computation: {A} * {B} = {R}.\n", op: '*', a: lit(float64(a)), b: lit(float64(b))},
			{say: "Adding the remaining part: {A} + {B} = {R}.\n", op: '+', a: ref(0), b: lit(float64(c))},
		},
		final: finalLine, plan: "Work it out step by step.",
	}).build()
	return d
}

// splitmix is SplitMix64's finaliser: a cheap, well-mixed hash step.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
