package mathenv

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLastBoxed(t *testing.T) {
	tests := []struct {
		name, text, want string
		ok               bool
	}{
		{"simple", `so the answer is \boxed{5}.`, "5", true},
		{"last wins", `first \boxed{3}, then \boxed{4}`, "4", true},
		{"nested braces", `\boxed{\frac{1}{2}}`, `\frac{1}{2}`, true},
		{"space before brace", `\boxed {42}`, "42", true},
		{"braceless", `$\boxed 7$`, "7", true},
		{"braceless at end", `answer: \boxed 12`, "12", true},
		{"fbox", `\fbox{x+1}`, "x+1", true},
		{"fbox after boxed", `\boxed{1} \fbox{2}`, "2", true},
		{"escaped braces", `\boxed{\{1,2\}}`, `\{1,2\}`, true},
		{"set", `\boxed{\left\{ 1, 2 \right\}}`, `\left\{ 1, 2 \right\}`, true},
		{"text inside", `\boxed{\text{(B)}}`, `\text{(B)}`, true},
		{"unclosed last", `\boxed{3} and finally \boxed{4`, "", false},
		{"none", `the answer is 5`, "", false},
		{"empty", `\boxed{}`, "", true},
		{"other command", `\boxedx`, "", false},
		{"multiline", "\\boxed{\n  12\n}", "\n  12\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := LastBoxed(tt.text)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLastIndexIsStringsLastIndex(t *testing.T) {
	tests := []struct{ s, sub string }{
		{`\boxed{1} \boxed{2}`, `\boxed`},
		{`no box`, `\boxed`},
		{``, `\fbox`},
		{`\boxed`, `\boxed`},
		{`aaaa`, `aa`}, // overlapping occurrences: the last starts at 2
		{`\fbo\fbox`, `\fbox`},
	}
	for _, tt := range tests {
		assert.Equal(t, strings.LastIndex(tt.s, tt.sub), lastIndex(tt.s, tt.sub), "%q in %q", tt.sub, tt.s)
	}
	// Random strings over the patterns' own letters, where partial and overlapping matches
	// are common.
	rng := rand.New(rand.NewPCG(1, 2))
	letters := []byte(`\boxedfa`)
	for range 20000 {
		s := make([]byte, rng.IntN(40))
		for i := range s {
			s[i] = letters[rng.IntN(len(letters))]
		}
		for _, sub := range []string{`\boxed`, `\fbox`, `aa`, `\b`} {
			require.Equal(t, strings.LastIndex(string(s), sub), lastIndex(string(s), sub), "%q in %q", sub, s)
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{" 5 ", "5"},
		{"$5$", "5"},
		{`\$5`, "5"},
		{"5.", "5"},
		{`\left( 1, 2 \right)`, "(1,2)"},
		{`\rightarrow`, `\rightarrow`},
		{`\text{yes}`, "yes"},
		{`\textbf{ 12 }`, "12"},
		{`\mathrm{B}`, "B"},
		{`\dfrac{3}{4}`, `\frac{3}{4}`},
		{`\tfrac12`, `\frac{1}{2}`},
		{`\frac1{2}`, `\frac{1}{2}`},
		{`\frac{1}2`, `\frac{1}{2}`},
		{`2\sqrt3`, `2\sqrt{3}`},
		{`90^\circ`, "90"},
		{`90^{\circ}`, "90"},
		{`45°`, "45"},
		{`50\%`, "50"},
		{`x = 5`, "5"},
		{`y_1=-3`, "-3"},
		{`a=b=c`, "a=b=c"},
		{"1,000", "1000"},
		{"1,234,567.5", "1234567.5"},
		{"(1,2)", "(1,2)"},
		{"(B)", "B"},
		{`\!\,5\;`, "5"},
		{`\displaystyle\frac{1}{2}`, `\frac{1}{2}`},
		{"−3", "-3"},
		{`\{1,2\}`, "{1,2}"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, Normalize(tt.in))
		})
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"5", "5", true},
		{"5", "5.0", true},
		{"5", "5.00", true},
		{"0.5", "1/2", true},
		{"0.5", `\frac{1}{2}`, true},
		{".5", `\frac12`, true},
		{`\dfrac{1}{2}`, "0.5", true},
		{`-\frac{1}{2}`, "-0.5", true},
		{`\frac{-1}{2}`, "-1/2", true},
		{`\frac{3}{4}`, "0.75", true},
		{`\frac{6}{8}`, `\frac{3}{4}`, true},
		{`\frac{1}{3}`, "0.333", false},
		{"1,000", "1000", true},
		{"10\\%", "10", true},
		{"$x = 12$", "12", true},
		{`\text{(B)}`, "B", true},
		{"Yes", "yes", true},
		{`2\sqrt{3}`, `2 \sqrt 3`, true},
		{`\left(1, 2\right)`, "(1,2)", true},
		{`(-\infty, 2]`, `(-\infty,2]`, true},
		{`\frac{\sqrt{3}}{2}`, `\frac{\sqrt3}{2}`, true},
		{"1e3", "1000", true},
		{"1e99999", "1", false},
		{"5", "6", false},
		{"5", "-5", false},
		{"x", "y", false},
		{"", "", false},
		{"2", "2x", false},
		{`\frac{1}{0}`, "1", false},
		{"1/0", "0", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+"=="+tt.b, func(t *testing.T) {
			assert.Equal(t, tt.want, Equal(tt.a, tt.b))
			assert.Equal(t, tt.want, Equal(tt.b, tt.a), "symmetric")
		})
	}
}

// gradeCases are responses graded against labels; TestGrade checks Grade on them and
// TestEnvGradesAsGradeEpisode the Env's prepared label.
var gradeCases = []struct {
	name, response, label string
	answer                string
	correct               bool
}{
	{"bare label", `3x = 15, so x = 5. \boxed{5}`, "5", "5", true},
	{"boxed label", `\boxed{5}`, `\boxed{5}`, "5", true},
	{"decimal vs fraction label", `The probability is \boxed{0.5}.`, `\boxed{\frac{1}{2}}`, "0.5", true},
	{"integer vs float", `\boxed{5.0}`, "5", "5.0", true},
	{"last boxed counts", `maybe \boxed{4}? no: \boxed{5}`, "5", "5", true},
	{"earlier correct does not count", `\boxed{5} wait, \boxed{4}`, "5", "4", false},
	{"inline math", `$\boxed{x=5}$`, "5", "x=5", true},
	{"wrong", `\boxed{6}`, "5", "6", false},
	{"no answer", `I think it is 5`, "5", "", false},
	{"truncated", `\boxed{\frac{1}{`, `\frac{1}{2}`, "", false},
	{"thinking then answer", "<think>maybe \\boxed{3}</think>\nFinal: \\boxed{\\dfrac{3}{4}}", "0.75", `\dfrac{3}{4}`, true},
	{"multiple choice", `\boxed{\text{(C)}}`, "C", `\text{(C)}`, true},
	{"word answer", `\boxed{\text{No}}`, "no", `\text{No}`, true},
	{"interval", `\boxed{[2, \infty)}`, `[2,\infty)`, `[2, \infty)`, true},
	{"tuple", `\boxed{(3, -1)}`, "(3,-1)", "(3, -1)", true},
	{"degrees", `\boxed{30^\circ}`, "30", `30^\circ`, true},
	{"percent", `\boxed{25\%}`, "25", `25\%`, true},
	{"thousands", `\boxed{12,000}`, "12000", "12,000", true},
	{"bare number label vs word", `\boxed{five}`, "5", "five", false},
	{"label not a number", `\boxed{x+1}`, `\boxed{x + 1}`, "x+1", true},
	{"empty boxed label", `\boxed{}`, `\boxed{}`, "", false},
}

func TestGrade(t *testing.T) {
	for _, tt := range gradeCases {
		t.Run(tt.name, func(t *testing.T) {
			answer, correct := Grade(tt.response, tt.label)
			assert.Equal(t, tt.answer, answer)
			assert.Equal(t, tt.correct, correct)
		})
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{`\boxed{\frac{1}{2}}`, `\text{`, `\frac{`, "1e5", `x=\left(`, `\boxed 5`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		_ = Equal(s, n)
		_, _ = Number(n)
		_, _ = LastBoxed(s)
	})
}
