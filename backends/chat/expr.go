package chat

import (
	"errors"
	"strings"
)

// The engine evaluates `a + b`, `x in y` and `x is iterable` more leniently than Python:
// it concatenates None, undefined values and dicts into strings where Python raises
// TypeError or UndefinedError, finds nothing in None where Python raises, and calls an
// undefined value not iterable where Jinja2 iterates it as empty. rewriteExpr parses a
// tag's expression with Jinja2's grammar and re-emits it with those three operations as
// calls to Python-faithful functions (pyAdd, pyIn, pyIterable), the operands of ~ and the
// |string filter converted with Python's str(), and everything else emitted as written.
const (
	addFunc      = "__focus_add"
	inFunc       = "__focus_in"
	iterableFunc = "__focus_iterable"
	methodFunc   = "__focus_method"
)

// dictMethods are the dict methods templates call; the engine looks a key of the same
// name up first (a tool parameter named "items" made properties.items() call that
// parameter's schema), so x.items() and the others become methodFunc calls.
var dictMethods = map[string]bool{"items": true, "keys": true, "values": true, "get": true}

// textFilters are the Jinja2 filters that take their input through str() first (soft_str);
// the engine's own versions print numbers and containers its own way (1.0 as "1").
var textFilters = map[string]bool{"trim": true, "upper": true, "lower": true, "capitalize": true, "title": true,
	"replace": true, "center": true, "indent": true, "truncate": true, "wordcount": true, "striptags": true}

type exprToken struct {
	kind       byte // 'n' name, 's' string, 'd' number, 'o' operator
	text       string
	start, end int
}

func tokenizeExpr(s string) ([]exprToken, error) {
	var toks []exprToken
	ops := []string{"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", "<", ">", "="}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case strings.IndexByte(jinjaSpace, c) >= 0:
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			toks = append(toks, exprToken{'n', s[i:j], i, j})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && (isIdentByte(s[j]) || s[j] == '.' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' ||
				(s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			toks = append(toks, exprToken{'d', s[i:j], i, j})
			i = j
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, errors.New("unterminated string")
			}
			toks = append(toks, exprToken{'s', s[i : j+1], i, j + 1})
			i = j + 1
		default:
			matched := false
			for _, op := range ops {
				if strings.HasPrefix(s[i:], op) {
					toks = append(toks, exprToken{'o', op, i, i + len(op)})
					i += len(op)
					matched = true
					break
				}
			}
			if !matched {
				return nil, errors.New("unexpected character " + string(c))
			}
		}
	}
	return toks, nil
}

// exprParser re-emits a token stream; each parse method returns the emitted text.
type exprParser struct {
	src  string
	toks []exprToken
	pos  int
}

var errExpr = errors.New("unsupported expression")

func (p *exprParser) peek() exprToken {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return exprToken{}
}

func (p *exprParser) is(kind byte, text string) bool {
	t := p.peek()
	return t.kind == kind && t.text == text
}

func (p *exprParser) op(text string) bool   { return p.is('o', text) }
func (p *exprParser) word(text string) bool { return p.is('n', text) }

func (p *exprParser) expect(text string) error {
	if !p.op(text) {
		return errExpr
	}
	p.pos++
	return nil
}

// source is the original text of tokens [from, p.pos), as a quoted template string.
func (p *exprParser) source(from int) string {
	if from >= p.pos {
		return "''"
	}
	s := p.src[p.toks[from].start:p.toks[p.pos-1].end]
	s = strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", " ", "\r", " ").Replace(s)
	return "'" + s + "'"
}

func (p *exprParser) parseExpr() (string, error) { return p.parseCond(true) }

func (p *exprParser) parseCond(withCond bool) (string, error) {
	a, err := p.parseOr()
	if err != nil || !withCond {
		return a, err
	}
	for p.word("if") {
		p.pos++
		cond, err := p.parseOr()
		if err != nil {
			return "", err
		}
		if p.word("else") {
			p.pos++
			b, err := p.parseCond(true)
			if err != nil {
				return "", err
			}
			a = a + " if " + cond + " else " + b
		} else {
			a = a + " if " + cond
		}
	}
	return a, nil
}

func (p *exprParser) parseOr() (string, error) {
	a, err := p.parseAnd()
	for err == nil && p.word("or") {
		p.pos++
		var b string
		b, err = p.parseAnd()
		a = a + " or " + b
	}
	return a, err
}

func (p *exprParser) parseAnd() (string, error) {
	a, err := p.parseNot()
	for err == nil && p.word("and") {
		p.pos++
		var b string
		b, err = p.parseNot()
		a = a + " and " + b
	}
	return a, err
}

func (p *exprParser) parseNot() (string, error) {
	if p.word("not") {
		p.pos++
		a, err := p.parseNot()
		return "not " + a, err
	}
	return p.parseCompare()
}

func (p *exprParser) parseCompare() (string, error) {
	from := p.pos
	a, err := p.parseMath1()
	if err != nil {
		return "", err
	}
	for {
		t := p.peek()
		switch {
		case t.kind == 'o' && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">="):
			p.pos++
			b, err := p.parseMath1()
			if err != nil {
				return "", err
			}
			a = a + " " + t.text + " " + b
		case p.word("in"):
			p.pos++
			b, err := p.parseMath1()
			if err != nil {
				return "", err
			}
			a = inFunc + "(" + a + ", " + b + ", " + p.source(from) + ")"
		case p.word("not") && p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == 'n' && p.toks[p.pos+1].text == "in":
			p.pos += 2
			b, err := p.parseMath1()
			if err != nil {
				return "", err
			}
			a = "(not " + inFunc + "(" + a + ", " + b + ", " + p.source(from) + "))"
		default:
			return a, nil
		}
	}
}

func (p *exprParser) parseMath1() (string, error) {
	from := p.pos
	a, err := p.parseConcat()
	for err == nil && (p.op("+") || p.op("-")) {
		plus := p.op("+")
		p.pos++
		var b string
		b, err = p.parseConcat()
		if plus {
			a = addFunc + "(" + a + ", " + b + ", " + p.source(from) + ")"
		} else {
			a = a + " - " + b
		}
	}
	return a, err
}

func (p *exprParser) parseConcat() (string, error) {
	a, err := p.parseMath2()
	if err != nil || !p.op("~") {
		return a, err
	}
	// Each operand is converted with str() first: the engine's ~ prints None, floats and
	// dicts its own way.
	a = "(" + a + ")|" + strFilter
	for p.op("~") {
		p.pos++
		b, err := p.parseMath2()
		if err != nil {
			return "", err
		}
		a = a + " ~ (" + b + ")|" + strFilter
	}
	return a, nil
}

func (p *exprParser) parseMath2() (string, error) {
	a, err := p.parsePow()
	for err == nil && (p.op("*") || p.op("/") || p.op("//") || p.op("%")) {
		o := p.peek().text
		p.pos++
		var b string
		b, err = p.parsePow()
		a = a + " " + o + " " + b
	}
	return a, err
}

func (p *exprParser) parsePow() (string, error) {
	a, err := p.parseUnary(true)
	for err == nil && p.op("**") {
		p.pos++
		var b string
		b, err = p.parseUnary(true)
		a = a + " ** " + b
	}
	return a, err
}

func (p *exprParser) parseUnary(withFilter bool) (string, error) {
	var a string
	var err error
	if p.op("-") || p.op("+") {
		o := p.peek().text
		p.pos++
		a, err = p.parseUnary(false)
		a = o + a
	} else {
		a, err = p.parsePrimary()
	}
	if err != nil {
		return "", err
	}
	if a, err = p.parsePostfix(a); err != nil {
		return "", err
	}
	if withFilter {
		return p.parseFilters(a)
	}
	return a, nil
}

func (p *exprParser) parsePrimary() (string, error) {
	t := p.peek()
	switch {
	case t.kind == 'n':
		p.pos++
		return t.text, nil
	case t.kind == 'd':
		p.pos++
		return t.text, nil
	case t.kind == 's':
		p.pos++
		s := t.text
		for p.peek().kind == 's' { // adjacent literals concatenate
			s += " ~ " + p.peek().text
			p.pos++
		}
		if strings.Contains(s, " ~ ") {
			s = "(" + s + ")"
		}
		return s, nil
	case p.op("("):
		p.pos++
		items, err := p.parseList(")")
		return "(" + items + ")", err
	case p.op("["):
		p.pos++
		items, err := p.parseList("]")
		return "[" + items + "]", err
	case p.op("{"):
		p.pos++
		var parts []string
		for !p.op("}") {
			k, err := p.parseExpr()
			if err != nil {
				return "", err
			}
			if err := p.expect(":"); err != nil {
				return "", err
			}
			v, err := p.parseExpr()
			if err != nil {
				return "", err
			}
			parts = append(parts, k+": "+v)
			if !p.op(",") {
				break
			}
			p.pos++
		}
		if err := p.expect("}"); err != nil {
			return "", err
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	}
	return "", errExpr
}

// parseList parses comma-separated expressions up to and including closer.
func (p *exprParser) parseList(closer string) (string, error) {
	var parts []string
	trailing := false
	for !p.op(closer) {
		e, err := p.parseExpr()
		if err != nil {
			return "", err
		}
		parts = append(parts, e)
		trailing = false
		if !p.op(",") {
			break
		}
		p.pos++
		trailing = true
	}
	if err := p.expect(closer); err != nil {
		return "", err
	}
	out := strings.Join(parts, ", ")
	if trailing {
		out += "," // keeps a one-element tuple a tuple
	}
	return out, nil
}

func (p *exprParser) parsePostfix(a string) (string, error) {
	for {
		switch {
		case p.op("."):
			p.pos++
			t := p.peek()
			if t.kind != 'n' && t.kind != 'd' {
				return "", errExpr
			}
			p.pos++
			if dictMethods[t.text] && p.op("(") {
				p.pos++
				args, err := p.parseArgs()
				if err != nil {
					return "", err
				}
				if args != "" {
					args = ", " + args
				}
				a = methodFunc + "(" + a + ", '" + t.text + "'" + args + ")"
				continue
			}
			a = a + "." + t.text
		case p.op("["):
			p.pos++
			sub, err := p.parseSubscript()
			if err != nil {
				return "", err
			}
			a = a + "[" + sub + "]"
		case p.op("("):
			p.pos++
			args, err := p.parseArgs()
			if err != nil {
				return "", err
			}
			a = a + "(" + args + ")"
		default:
			return a, nil
		}
	}
}

// parseSubscript parses an index or a slice (a:b:c, parts optional) through "]".
func (p *exprParser) parseSubscript() (string, error) {
	var b strings.Builder
	for !p.op("]") {
		if p.op(":") {
			b.WriteString(":")
			p.pos++
			continue
		}
		e, err := p.parseExpr()
		if err != nil {
			return "", err
		}
		b.WriteString(e)
		if p.op(",") {
			return "", errExpr
		}
	}
	p.pos++
	return b.String(), nil
}

// parseArgs parses call arguments (positional and name=value) through ")".
func (p *exprParser) parseArgs() (string, error) {
	var parts []string
	for !p.op(")") {
		prefix := ""
		if p.peek().kind == 'n' && p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == 'o' && p.toks[p.pos+1].text == "=" {
			prefix = p.peek().text + "="
			p.pos += 2
		}
		e, err := p.parseExpr()
		if err != nil {
			return "", err
		}
		parts = append(parts, prefix+e)
		if !p.op(",") {
			break
		}
		p.pos++
	}
	if err := p.expect(")"); err != nil {
		return "", err
	}
	return strings.Join(parts, ", "), nil
}

func (p *exprParser) parseFilters(a string) (string, error) {
	for {
		switch {
		case p.op("|"):
			p.pos++
			t := p.peek()
			if t.kind != 'n' {
				return "", errExpr
			}
			p.pos++
			name := t.text
			switch name {
			case "tojson":
				name = tojsonFilter
			case "map":
				name = mapFilter
			case "string":
				name = strFilter
			default:
				if textFilters[name] {
					name = strFilter + "|" + name
				}
			}
			a = a + "|" + name
			if p.op("(") {
				p.pos++
				args, err := p.parseArgs()
				if err != nil {
					return "", err
				}
				a = a + "(" + args + ")"
			}
		case p.word("is"):
			p.pos++
			negated := false
			if p.word("not") {
				negated = true
				p.pos++
			}
			t := p.peek()
			if t.kind != 'n' {
				return "", errExpr
			}
			p.pos++
			if t.text == "iterable" {
				a = iterableFunc + "(" + a + ")"
				if negated {
					a = "(not " + a + ")"
				}
				continue
			}
			test := " is "
			if negated {
				test = " is not "
			}
			a = a + test + t.text
			if p.op("(") {
				p.pos++
				args, err := p.parseArgs()
				if err != nil {
					return "", err
				}
				a = a + "(" + args + ")"
			} else if n := p.peek(); n.kind == 's' || n.kind == 'd' || (n.kind == 'n' && !isExprKeyword(n.text)) {
				arg, err := p.parsePrimary()
				if err != nil {
					return "", err
				}
				if arg, err = p.parsePostfix(arg); err != nil {
					return "", err
				}
				a = a + " " + arg
			}
			a = "(" + a + ")"
		default:
			return a, nil
		}
	}
}

func isExprKeyword(s string) bool {
	switch s {
	case "and", "or", "not", "in", "is", "if", "else", "recursive":
		return true
	}
	return false
}

// rewriteExpr re-emits one whole expression; ok is false when it is not one the parser
// knows (the caller then keeps the tag as written).
func rewriteExpr(src string) (string, bool) {
	toks, err := tokenizeExpr(src)
	if err != nil {
		return "", false
	}
	p := &exprParser{src: src, toks: toks}
	out, err := p.parseExpr()
	if err != nil || p.pos != len(toks) {
		return "", false
	}
	return out, true
}

// rewriteStatement re-emits the expressions of an if, elif, set (= form) or for
// statement body (without its delimiters); other statements come back unchanged.
func rewriteStatement(body string) (string, bool) {
	toks, err := tokenizeExpr(body)
	if err != nil || len(toks) == 0 || toks[0].kind != 'n' {
		return "", false
	}
	switch toks[0].text {
	case "if", "elif":
		e, ok := rewriteExpr(body[toks[0].end:])
		return toks[0].text + " " + e, ok
	case "set":
		for _, t := range toks {
			if t.kind == 'o' && t.text == "=" {
				e, ok := rewriteExpr(body[t.end:])
				return strings.TrimSpace(body[:t.end]) + " " + e, ok
			}
		}
		return body, true // a {% set x %}...{% endset %} block
	case "for":
		in := -1
		for i, t := range toks {
			if t.kind == 'n' && t.text == "in" {
				in = i
				break
			}
		}
		if in < 0 {
			return "", false
		}
		p := &exprParser{src: body, toks: toks, pos: in + 1}
		iter, err := p.parseCond(false)
		if err != nil {
			return "", false
		}
		out := strings.TrimSpace(body[:toks[in].end]) + " " + iter
		if p.word("if") {
			p.pos++
			cond, err := p.parseExpr()
			if err != nil {
				return "", false
			}
			out += " if " + cond
		}
		if p.word("recursive") {
			p.pos++
			out += " recursive"
		}
		return out, p.pos == len(toks)
	}
	return body, true
}
