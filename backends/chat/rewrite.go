package chat

import "strings"

// rewriteFilters prepares a template source for the engine. Inside {{ }} and {% %} tags
// it renames each filter application `| tojson` to tojsonFilter and `| map` to mapFilter
// (the engine looks up built-in filters before the render scope, so these two must carry
// names it does not define), leaving text, comments, string literals and {% raw %} blocks
// alone. It also applies Jinja2's whitespace control here, lexically as Jinja2's lexer
// does: a tag opened with "-" ({%-, {{-, {#-) strips the whitespace before it, one closed
// with "-" strips the whitespace after it, and the "-" is removed (the engine strips the
// neighbouring output of the tag's parent node instead, which loses spaces Jinja2 keeps).
//
// Every {{ expr }} becomes {{ (expr)|strFilter }}, so values print as Python's str()
// prints them (None as "None", 1.0 as "1.0", dicts and lists as their repr); the engine's
// own printing differs.
//
// It also returns the string literals the tags hold (the role names a template compares
// message roles with, among others) and the tags whose expressions the rewriter does not
// parse (kept as written, with only the filter renames; tests check real templates have none).
func rewriteFilters(src string) (string, map[string]bool, []string) {
	literals := map[string]bool{}
	var unparsed []string
	out := make([]byte, 0, len(src)+64)
	textStart := 0     // where the text since the last tag begins in out
	stripNext := false // the last tag closed with "-"
	writeText := func(text string) {
		if stripNext {
			text = strings.TrimLeft(text, jinjaSpace)
			stripNext = false
		}
		out = append(out, text...)
	}
	i := 0
	for i < len(src) {
		open := strings.IndexByte(src[i:], '{')
		if open < 0 || i+open+1 >= len(src) {
			writeText(src[i:])
			break
		}
		open += i
		kind := src[open+1]
		if kind != '{' && kind != '%' && kind != '#' {
			writeText(src[i : open+1])
			i = open + 1
			continue
		}
		writeText(src[i:open])
		body := open + 2
		if body < len(src) && src[body] == '-' {
			for len(out) > textStart && strings.IndexByte(jinjaSpace, out[len(out)-1]) >= 0 {
				out = out[:len(out)-1]
			}
			body++
		}
		out = append(out, src[open:open+2]...)
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[kind]
		var end int
		var tag string
		if kind == '#' {
			end = strings.Index(src[body:], "#}")
			if end < 0 {
				out = append(out, src[body:]...)
				return string(out), literals, unparsed
			}
			end += 2
			tag = src[body : body+end]
		} else {
			end, tag = rewriteTag(src[body:], closer, literals)
		}
		if strings.HasSuffix(tag, "-"+closer) {
			tag = tag[:len(tag)-len(closer)-1] + closer
			stripNext = true
		}
		inner := strings.TrimSuffix(tag, closer)
		switch kind {
		case '{':
			if e, ok := rewriteExpr(inner); ok {
				inner = e
			} else {
				unparsed = append(unparsed, tag)
			}
			// Print as Python's str() does (None, floats, dicts and lists differ in the engine).
			tag = " (" + inner + ")|" + strFilter + " " + closer
		case '%':
			if st, ok := rewriteStatement(inner); ok {
				tag = " " + st + " " + closer
			} else {
				unparsed = append(unparsed, tag)
			}
		}
		out = append(out, tag...)
		i = body + end
		textStart = len(out)
		if kind == '%' && isRawTag(tag) {
			// Copy the raw block through its {% endraw %} untouched.
			stop := rawEnd(src[i:])
			out = append(out, src[i:i+stop]...)
			i += stop
			textStart = len(out)
		}
	}
	return string(out), literals, unparsed
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

func isRawTag(tag string) bool {
	body := strings.TrimSuffix(tag, "%}")
	body = strings.Trim(body, "-+ \t\n\r")
	return body == "raw"
}

// rawEnd is the offset just past the {% endraw %} tag in s (len(s) when there is none).
func rawEnd(s string) int {
	for i := 0; i < len(s); i++ {
		if !strings.HasPrefix(s[i:], "{%") {
			continue
		}
		j := i + 2
		for j < len(s) && strings.ContainsRune("-+ \t\n\r", rune(s[j])) {
			j++
		}
		if strings.HasPrefix(s[j:], "endraw") {
			if k := strings.Index(s[j:], "%}"); k >= 0 {
				return j + k + 2
			}
		}
	}
	return len(s)
}
