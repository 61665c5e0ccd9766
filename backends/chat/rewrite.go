package chat

import (
	"strings"
	"unicode"
)

// rewriteFilters prepares a template source for the engine, in two steps.
//
// Whitespace, exactly as Jinja2's lexer treats it under transformers' settings: a tag
// opened with "-" ({%-, {{-, {#-) strips all whitespace before it, one closed with "-"
// all whitespace after it; without markers a block or comment tag alone on its line takes
// that line's indentation with it (lstrip_blocks, "+" opts out) and eats one newline after
// it (trim_blocks, "+%}" opts out); comments vanish and {% raw %} blocks become literals.
// The engine gets the result with no markers and with every text segment's leading and
// trailing whitespace moved into {{ '...' }} literals, because its own trimming applies to
// the nearest text segment even across {{ }} tags (it loses indentation Jinja2 keeps).
//
// Expressions: inside {{ }} and {% %} tags each expression is re-emitted by the Python
// semantics rewriter (expr.go): `| tojson` becomes tojsonFilter and `| map` mapFilter (the
// engine looks up built-in filters before the render scope, so these carry names it does
// not define), +, in, ~, |string and `is iterable` follow Python, and every {{ expr }}
// becomes {{ (expr)|strFilter }}, so values print as Python's str() prints them.
//
// It also returns the string literals the tags hold (the role names a template compares
// message roles with, among others) and the tags whose expressions the rewriter does not
// parse (kept as written, with only the filter renames; tests check real templates have none).
func rewriteFilters(src string) (string, map[string]bool, []string) {
	literals := map[string]bool{}
	var unparsed []string
	segs := lexSegments(src)
	trimSegments(segs)
	var out strings.Builder
	out.Grow(len(src) + 256)
	for _, sg := range segs {
		switch sg.kind {
		case 't':
			text := sg.text
			lead := len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace))
			rest := strings.TrimRightFunc(text[lead:], unicode.IsSpace)
			// A text ending in "{" would open a tag with whatever follows it.
			rest = strings.TrimSuffix(rest, "{")
			writeLiteral(&out, text[:lead])
			out.WriteString(rest)
			writeLiteral(&out, text[lead+len(rest):])
		case 'r':
			writeLiteral(&out, sg.text)
		case '#':
		case '{':
			_, tag := rewriteTag(sg.text+"}}", "}}", literals)
			inner := strings.TrimSuffix(tag, "}}")
			if e, ok := rewriteExpr(inner); ok {
				inner = e
			} else {
				unparsed = append(unparsed, "{{"+sg.text+"}}")
			}
			// Print as Python's str() does (None, floats, dicts and lists differ in the engine).
			out.WriteString("{{ (" + inner + ")|" + strFilter + " }}")
		case '%':
			_, tag := rewriteTag(sg.text+"%}", "%}", literals)
			inner := strings.TrimSuffix(tag, "%}")
			if st, ok := rewriteStatement(inner); ok {
				inner = st
			} else {
				unparsed = append(unparsed, "{%"+sg.text+"%}")
			}
			out.WriteString("{% " + inner + " %}")
		}
	}
	return out.String(), literals, unparsed
}

// segment is one lexical piece of a template: text ('t'), a {{ }} ('{'), {% %} ('%') or
// {# #} ('#') tag with its body (markers removed) and whitespace markers, or the content
// of a raw block ('r').
type segment struct {
	kind        byte
	text        string
	left, right byte // '-', '+' or 0
	lineStart   bool // a text segment that begins a line (template start, or after a newline a tag ate)
}

// lexSegments splits a template into segments the way Jinja2's lexer finds tags: a tag
// ends at the first closer outside string literals.
func lexSegments(src string) []segment {
	var segs []segment
	i := 0
	for i < len(src) {
		open := -1
		for j := i; j+1 < len(src); j++ {
			if src[j] == '{' && (src[j+1] == '{' || src[j+1] == '%' || src[j+1] == '#') {
				open = j
				break
			}
		}
		if open < 0 {
			segs = append(segs, segment{kind: 't', text: src[i:]})
			break
		}
		if open > i {
			segs = append(segs, segment{kind: 't', text: src[i:open]})
		}
		kind := src[open+1]
		body := open + 2
		sg := segment{kind: kind}
		if body < len(src) && (src[body] == '-' || src[body] == '+') {
			sg.left = src[body]
			body++
		}
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[kind]
		end := tagEnd(src[body:], closer, kind != '#')
		if end < 0 { // unterminated: the engine reports it
			segs = append(segs, segment{kind: 't', text: src[open:]})
			break
		}
		inner := src[body : body+end]
		if strings.HasSuffix(inner, "-") || (kind != '{' && strings.HasSuffix(inner, "+")) {
			sg.right = inner[len(inner)-1]
			inner = inner[:len(inner)-1]
		}
		sg.text = inner
		segs = append(segs, sg)
		i = body + end + len(closer)
		if kind == '%' && strings.TrimSpace(inner) == "raw" {
			// The raw tag prints nothing; Jinja2 applies lstrip_blocks but not trim_blocks to it.
			segs[len(segs)-1].kind = '#'
			if segs[len(segs)-1].right == 0 {
				segs[len(segs)-1].right = '+'
			}
			stop, content, endTag := rawBlock(src[i:])
			segs = append(segs, segment{kind: 'r', text: content})
			segs = append(segs, endTag)
			i += stop
		}
	}
	return segs
}

// tagEnd is the offset of closer in s, outside string literals when quoted is set.
func tagEnd(s, closer string, quoted bool) int {
	for j := 0; j < len(s); j++ {
		c := s[j]
		if quoted && (c == '\'' || c == '"') {
			k := j + 1
			for k < len(s) && s[k] != c {
				if s[k] == '\\' {
					k++
				}
				k++
			}
			j = k
			continue
		}
		if strings.HasPrefix(s[j:], closer) {
			return j
		}
	}
	return -1
}

// rawBlock finds the {% endraw %} that closes a raw block: it returns how far it
// reaches, the raw content and the endraw tag as a segment (a comment, so it prints
// nothing but still applies its whitespace markers).
func rawBlock(s string) (int, string, segment) {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '{' || s[i+1] != '%' {
			continue
		}
		j := i + 2
		sg := segment{kind: '#'}
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			sg.left = s[j]
			j++
		}
		body := strings.TrimLeftFunc(s[j:], unicode.IsSpace)
		if !strings.HasPrefix(body, "endraw") {
			continue
		}
		k := strings.Index(s[j:], "%}")
		if k < 0 {
			break
		}
		inner := strings.TrimSpace(s[j : j+k])
		if strings.HasSuffix(inner, "-") || strings.HasSuffix(inner, "+") {
			sg.right = inner[len(inner)-1]
		}
		return j + k + 2, s[:i], sg
	}
	return len(s), s, segment{kind: '#'}
}

// trimSegments applies Jinja2's whitespace rules to the text segments in place, in
// source order as its lexer does.
func trimSegments(segs []segment) {
	if len(segs) > 0 && segs[0].kind == 't' {
		segs[0].lineStart = true
	}
	for i := range segs {
		sg := &segs[i]
		if sg.kind == 't' || sg.kind == 'r' {
			continue
		}
		// Left side: the text right before this tag, if any.
		if i > 0 && (segs[i-1].kind == 't' || segs[i-1].kind == 'r') {
			prev := &segs[i-1]
			switch {
			case sg.left == '-':
				prev.text = strings.TrimRightFunc(prev.text, unicode.IsSpace)
			case sg.left != '+' && sg.kind != '{':
				lpos := strings.LastIndexByte(prev.text, '\n') + 1
				if (lpos > 0 || prev.lineStart) && lpos < len(prev.text) && strings.TrimLeftFunc(prev.text[lpos:], unicode.IsSpace) == "" {
					prev.text = prev.text[:lpos]
				}
			}
		}
		// Right side: the text right after this tag.
		if i+1 < len(segs) && (segs[i+1].kind == 't' || segs[i+1].kind == 'r') {
			next := &segs[i+1]
			switch {
			case sg.right == '-':
				next.text = strings.TrimLeftFunc(next.text, unicode.IsSpace)
			case sg.right != '+' && sg.kind != '{' && strings.HasPrefix(next.text, "\n"):
				next.text = next.text[1:]
				next.lineStart = true
			}
		}
	}
}

// writeLiteral writes s as a {{ '...' }} string literal (nothing when empty).
func writeLiteral(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	b.WriteString("{{ '")
	// "}}" would end the engine's tag early, so it is split into two literals.
	b.WriteString(strings.NewReplacer(`\`, `\\`, `'`, `\'`, "}}", "}' ~ '}").Replace(s))
	b.WriteString("' }}")
}

// jinjaSpace is the whitespace "-" strips.
const jinjaSpace = " \t\n\r\f\v"

// rewriteTag copies one tag body up to and including closer (outside string literals),
// renaming filters; it returns how many bytes of s it consumed.
func rewriteTag(s, closer string, literals map[string]bool) (int, string) {
	var b strings.Builder
	afterPipe := false
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case strings.HasPrefix(s[i:], closer):
			b.WriteString(closer)
			return i + len(closer), b.String()
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(s) {
				literals[s[i+1:j]] = true
				j++
			}
			b.WriteString(s[i:j])
			i = j
			afterPipe = false
		case c == '|':
			b.WriteByte(c)
			i++
			afterPipe = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			b.WriteByte(c)
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			word := s[i:j]
			if afterPipe {
				switch word {
				case "tojson":
					word = tojsonFilter
				case "map":
					word = mapFilter
				}
			}
			b.WriteString(word)
			i = j
			afterPipe = false
		default:
			b.WriteByte(c)
			i++
			afterPipe = false
		}
	}
	return len(s), b.String()
}

func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isIdentByte(c byte) bool  { return isIdentStart(c) || (c >= '0' && c <= '9') }
