package chat

import "strings"

// rewriteFilters renames, inside the template's {{ }} and {% %} tags, each filter
// application `| tojson` to tojsonFilter and `| map` to mapFilter, leaving text, comments,
// string literals and {% raw %} blocks alone. The engine looks up built-in filters before
// the render scope, so these two must carry names the engine does not define.
//
// It also returns the string literals the tags hold (the role names a template compares
// message roles with, among others).
func rewriteFilters(src string) (string, map[string]bool) {
	literals := map[string]bool{}
	var b strings.Builder
	b.Grow(len(src) + 64)
	i := 0
	for i < len(src) {
		open := strings.Index(src[i:], "{")
		if open < 0 || i+open+1 >= len(src) {
			b.WriteString(src[i:])
			break
		}
		open += i
		next := src[open+1]
		switch next {
		case '#':
			end := strings.Index(src[open+2:], "#}")
			if end < 0 {
				b.WriteString(src[i:])
				return b.String(), literals
			}
			end += open + 4
			b.WriteString(src[i:end])
			i = end
			continue
		case '{', '%':
		default:
			b.WriteString(src[i : open+1])
			i = open + 1
			continue
		}
		b.WriteString(src[i : open+2])
		closer := "}}"
		if next == '%' {
			closer = "%}"
		}
		end, tag := rewriteTag(src[open+2:], closer, literals)
		b.WriteString(tag)
		i = open + 2 + end
		if next == '%' && isRawTag(tag) {
			// Copy the raw block through its {% endraw %} untouched.
			rest := src[i:]
			stop := rawEnd(rest)
			b.WriteString(rest[:stop])
			i += stop
		}
	}
	return b.String(), literals
}

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
