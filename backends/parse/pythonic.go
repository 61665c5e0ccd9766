package parse

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/focus-go/focus-go/core/action"
)

// ParsePythonic reads pythonic tool calls: a Python list of calls with keyword arguments,
//
//	[get_weather(city='Paris', days=3), search(query="x", filters=['a', 'b'])]
//
// which Gemma 3 writes when its prompt defines functions (Google's Gemma 3 function-calling
// guide; vLLM's and SGLang's pythonic parsers) and Llama 4 writes between <|python_start|>
// and <|python_end|>. A ```tool_code fence around the list is accepted as well. Argument
// values are Python literals (strings, numbers, True/False/None, lists, tuples, dicts with
// string keys) converted to JSON. Every call list in the reply is read and Text is what
// surrounds them. A list that opens like a call list ("[NAME(") but does not parse is one
// malformed call carrying the first name and the raw list; a bracket that is not a call
// list is text.
func ParsePythonic(r action.Result) action.ToolTurn {
	reasoning, visible := SplitReasoning(r.Text)
	const start, end = "<|python_start|>", "<|python_end|>"
	if i := strings.Index(visible, start); i >= 0 {
		body := visible[i+len(start):]
		after := ""
		if j := strings.Index(body, end); j >= 0 {
			body, after = body[:j], body[j+len(end):]
		}
		calls, rest, ok := pythonicCalls(body)
		if ok {
			return action.ToolTurn{Text: strings.TrimSpace(visible[:i] + rest + after), ToolCalls: calls, Reasoning: reasoning}
		}
	}
	var calls []action.ToolCall
	var text strings.Builder
	for rest := visible; ; {
		found, before, after, ok := pythonicList(rest)
		if !ok {
			text.WriteString(rest)
			break
		}
		calls = append(calls, found...)
		text.WriteString(before)
		rest = after
	}
	return action.ToolTurn{Text: strings.TrimSpace(text.String()), ToolCalls: calls, Reasoning: reasoning}
}

// pythonicCalls reads the call lists of s and returns their calls and the rest of s.
func pythonicCalls(s string) ([]action.ToolCall, string, bool) {
	var calls []action.ToolCall
	var text strings.Builder
	for {
		found, before, after, ok := pythonicList(s)
		if !ok {
			text.WriteString(s)
			return calls, text.String(), len(calls) > 0
		}
		calls = append(calls, found...)
		text.WriteString(before)
		s = after
	}
}

// pythonicList finds the first call list in s: its calls, the text before and after it.
func pythonicList(s string) ([]action.ToolCall, string, string, bool) {
	for off := 0; off < len(s); {
		i := strings.IndexByte(s[off:], '[')
		if i < 0 {
			break
		}
		at := off + i
		p := &pyParser{s: s, pos: at + 1}
		p.space()
		name := p.dotted()
		p.space()
		if name == "" || !p.peek('(') {
			off = at + 1
			continue
		}
		p.pos = at
		calls, err := p.callList()
		before, after := s[:at], s[p.pos:]
		if err != nil {
			end := strings.LastIndexByte(s, ']')
			if end < at {
				end = len(s) - 1
			}
			raw := s[at : end+1]
			before, after = s[:at], s[end+1:]
			calls = []action.ToolCall{{Name: name, Arguments: raw, Error: "pythonic tool call does not parse: " + err.Error()}}
		}
		before, after = stripFence(before, after)
		return calls, before, after, true
	}
	return nil, s, "", false
}

// stripFence removes a ```tool_code (or ```python) fence around the call list.
func stripFence(before, after string) (string, string) {
	b := strings.TrimRight(before, " \t\r\n")
	for _, open := range []string{"```tool_code", "```python", "```"} {
		if strings.HasSuffix(b, open) {
			if a := strings.TrimLeft(after, " \t\r\n"); strings.HasPrefix(a, "```") {
				return b[:len(b)-len(open)], a[3:]
			}
		}
	}
	return before, after
}

// pyParser reads Python call lists and literals from s at pos.
type pyParser struct {
	s   string
	pos int
}

func (p *pyParser) space() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *pyParser) peek(c byte) bool { return p.pos < len(p.s) && p.s[p.pos] == c }

func (p *pyParser) expect(c byte) error {
	p.space()
	if !p.peek(c) {
		return p.errorf("expected %q", c)
	}
	p.pos++
	return nil
}

func (p *pyParser) errorf(format string, args ...any) error {
	near := p.s[p.pos:]
	if len(near) > 20 {
		near = near[:20]
	}
	return fmt.Errorf("%s at offset %d (%q)", fmt.Sprintf(format, args...), p.pos, near)
}

func (p *pyParser) ident() string {
	start := p.pos
	for p.pos < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.pos:])
		if r == '_' || unicode.IsLetter(r) || (p.pos > start && unicode.IsDigit(r)) {
			p.pos += n
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

// dotted reads a function name, which may be qualified (module.func).
func (p *pyParser) dotted() string {
	start := p.pos
	for {
		if p.ident() == "" {
			p.pos = start
			return ""
		}
		if !p.peek('.') {
			return p.s[start:p.pos]
		}
		p.pos++
	}
}

// callList reads [call, call, ...].
func (p *pyParser) callList() ([]action.ToolCall, error) {
	if err := p.expect('['); err != nil {
		return nil, err
	}
	var calls []action.ToolCall
	for {
		p.space()
		if p.peek(']') && len(calls) > 0 {
			p.pos++
			return calls, nil
		}
		name := p.dotted()
		if name == "" {
			return nil, p.errorf("expected a function name")
		}
		args, err := p.kwargs()
		if err != nil {
			return nil, err
		}
		calls = append(calls, action.ToolCall{Name: name, Arguments: args})
		p.space()
		switch {
		case p.peek(','):
			p.pos++
		case p.peek(']'):
			p.pos++
			return calls, nil
		default:
			return nil, p.errorf("expected ',' or ']' after a call")
		}
	}
}

// kwargs reads (name=value, ...) into a JSON object string.
func (p *pyParser) kwargs() (string, error) {
	if err := p.expect('('); err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	for {
		p.space()
		if p.peek(')') {
			p.pos++
			b.WriteByte('}')
			return b.String(), nil
		}
		name := p.ident()
		if name == "" {
			return "", p.errorf("expected a keyword argument (positional arguments have no parameter name)")
		}
		if seen[name] {
			return "", p.errorf("argument %q is given twice", name)
		}
		seen[name] = true
		if err := p.expect('='); err != nil {
			return "", err
		}
		if len(seen) > 1 {
			b.WriteString(", ")
		}
		writeJSONString(&b, name)
		b.WriteString(": ")
		if err := p.value(&b); err != nil {
			return "", err
		}
		p.space()
		if p.peek(',') {
			p.pos++
		} else if !p.peek(')') {
			return "", p.errorf("expected ',' or ')' after an argument")
		}
	}
}

// value reads one Python literal and writes it as JSON.
func (p *pyParser) value(b *bytes.Buffer) error {
	p.space()
	if p.pos >= len(p.s) {
		return p.errorf("expected a value")
	}
	switch c := p.s[p.pos]; {
	case c == '\'' || c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		writeJSONString(b, s)
		return nil
	case c == '[' || c == '(':
		closing := byte(']')
		if c == '(' {
			closing = ')'
		}
		p.pos++
		b.WriteByte('[')
		for n := 0; ; n++ {
			p.space()
			if p.peek(closing) {
				p.pos++
				b.WriteByte(']')
				return nil
			}
			if n > 0 {
				b.WriteString(", ")
			}
			if err := p.value(b); err != nil {
				return err
			}
			p.space()
			if p.peek(',') {
				p.pos++
			} else if !p.peek(closing) {
				return p.errorf("expected ',' or %q in a list", closing)
			}
		}
	case c == '{':
		p.pos++
		b.WriteByte('{')
		for n := 0; ; n++ {
			p.space()
			if p.peek('}') {
				p.pos++
				b.WriteByte('}')
				return nil
			}
			if n > 0 {
				b.WriteString(", ")
			}
			if !p.peek('\'') && !p.peek('"') {
				return p.errorf("expected a string dict key (JSON objects have string keys)")
			}
			key, err := p.str()
			if err != nil {
				return err
			}
			writeJSONString(b, key)
			if err := p.expect(':'); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := p.value(b); err != nil {
				return err
			}
			p.space()
			if p.peek(',') {
				p.pos++
			} else if !p.peek('}') {
				return p.errorf("expected ',' or '}' in a dict")
			}
		}
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number(b)
	}
	start := p.pos
	switch word := p.ident(); word {
	case "True", "true":
		b.WriteString("true")
	case "False", "false":
		b.WriteString("false")
	case "None", "null":
		b.WriteString("null")
	default:
		p.pos = start
		return p.errorf("expected a literal value (names, calls and expressions are not values)")
	}
	return nil
}

func (p *pyParser) number(b *bytes.Buffer) error {
	start := p.pos
	if p.peek('-') || p.peek('+') {
		p.pos++
	}
	for p.pos < len(p.s) && strings.IndexByte("0123456789.eE_+-xXabcdefABCDEFoO", p.s[p.pos]) >= 0 {
		if (p.s[p.pos] == '+' || p.s[p.pos] == '-') && !strings.ContainsAny(p.s[p.pos-1:p.pos], "eE") {
			break
		}
		p.pos++
	}
	lit := strings.ReplaceAll(p.s[start:p.pos], "_", "")
	lit = strings.TrimPrefix(lit, "+")
	if n, err := strconv.ParseInt(lit, 0, 64); err == nil && !strings.ContainsAny(lit, ".eE") {
		b.WriteString(strconv.FormatInt(n, 10))
		return nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.pos = start
		return p.errorf("number %q is not a finite number", lit)
	}
	if isJSONNumber(lit) {
		b.WriteString(lit)
	} else {
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return nil
}

// str reads a Python string literal ('...', "...", or triple-quoted) with its escapes.
func (p *pyParser) str() (string, error) {
	q := p.s[p.pos]
	triple := strings.HasPrefix(p.s[p.pos:], strings.Repeat(string(q), 3))
	closing := string(q)
	if triple {
		closing = strings.Repeat(string(q), 3)
	}
	p.pos += len(closing)
	var out strings.Builder
	for p.pos < len(p.s) {
		if strings.HasPrefix(p.s[p.pos:], closing) {
			p.pos += len(closing)
			return out.String(), nil
		}
		c := p.s[p.pos]
		if c == '\n' && !triple {
			return "", p.errorf("unterminated string")
		}
		if c != '\\' {
			out.WriteByte(c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.s) {
			break
		}
		e := p.s[p.pos+1]
		p.pos += 2
		switch e {
		case 'n':
			out.WriteByte('\n')
		case 't':
			out.WriteByte('\t')
		case 'r':
			out.WriteByte('\r')
		case '0':
			out.WriteByte(0)
		case '\\', '\'', '"':
			out.WriteByte(e)
		case '\n':
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if p.pos+n > len(p.s) {
				return "", p.errorf("short \\%c escape", e)
			}
			v, err := strconv.ParseUint(p.s[p.pos:p.pos+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", p.errorf("bad \\%c escape", e)
			}
			out.WriteRune(rune(v))
			p.pos += n
		default:
			out.WriteByte('\\')
			out.WriteByte(e)
		}
	}
	return "", p.errorf("unterminated string")
}

// pyLiteralJSON converts s, one whole Python literal (a dict or list with single-quoted
// strings, True/None, ...), to JSON.
func pyLiteralJSON(s string) (string, bool) {
	p := &pyParser{s: s}
	var b bytes.Buffer
	if p.value(&b) != nil {
		return "", false
	}
	p.space()
	return b.String(), p.pos == len(s)
}
