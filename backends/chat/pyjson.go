package chat

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
	"github.com/focus-go/focus-go/core/status"
)

// The engine's own tojson sorts keys and HTML-escapes <, > and & once indent is given, and
// prints floats the Go way; transformers replaces Jinja2's tojson with
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys).
// Compile therefore rewrites every `|tojson` (and `|map(...)`, whose engine version ignores
// a filter name) to these internal names, which the engine resolves from the render scope.
const (
	tojsonFilter = "__focus_tojson"
	mapFilter    = "__focus_map"
	strFilter    = "__focus_str"
)

// printValue is what {{ value }} prints in Python Jinja2: str(value), and "" for an
// undefined value.
func printValue(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 || args[0].IsUndefined() {
		return jinja.NewString(""), nil
	}
	if args[0].IsCallable() {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "chat: the template prints a function (%s), which has no text form", args[0].String())
	}
	return jinja.NewString(pyStr(args[0])), nil
}

// pyJSON holds json.dumps's options.
type pyJSON struct {
	ensureASCII bool
	indent      *string // nil: one line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// tojson is transformers' tojson filter: tojson(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), arguments by position or by name.
func tojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "tojson: missing the value to encode")
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(args) > 1+len(names) {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "tojson: takes at most %d arguments, got %d", len(names), len(args)-1)
	}
	opt := map[string]jinja.Value{}
	for i, a := range args[1:] {
		opt[names[i]] = a
	}
	for k, v := range kwargs {
		known := false
		for _, n := range names {
			known = known || n == k
		}
		if !known {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "tojson: unexpected keyword argument %q (expected ensure_ascii, indent, separators, sort_keys)", k)
		}
		if _, dup := opt[k]; dup {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "tojson: got multiple values for argument %q", k)
		}
		opt[k] = v
	}
	e := pyJSON{itemSep: ", ", keySep: ": "}
	if v, ok := opt["ensure_ascii"]; ok {
		e.ensureASCII = v.IsTruthy()
	}
	if v, ok := opt["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		var s string
		switch {
		case v.IsString():
			s = v.AsString()
		case v.IsInt() || v.IsBool():
			n := int64(0)
			if v.IsInt() {
				n = v.AsInt()
			} else if v.AsBool() {
				n = 1
			}
			if n > 0 {
				s = strings.Repeat(" ", int(n))
			}
		default:
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "tojson: indent must be an integer or a string, got %s", v.String())
		}
		e.indent = &s
		e.itemSep = "," // json.dumps's default separators with an indent
	}
	if v, ok := opt["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Items[0].IsString() || !v.AsList().Items[1].IsString() {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "tojson: separators must be a pair of strings, got %s", v.String())
		}
		e.itemSep, e.keySep = v.AsList().Items[0].AsString(), v.AsList().Items[1].AsString()
	}
	if v, ok := opt["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	var b strings.Builder
	if err := e.encode(&b, args[0], 0); err != nil {
		return jinja.Value{}, err
	}
	return jinja.NewString(b.String()), nil
}

// PythonJSON encodes v exactly as Python's json.dumps(v, ensure_ascii=False) does (keys in
// their order, ", " and ": " separators, floats as Python's repr).
func PythonJSON(v jinja.Value) (string, error) {
	var b strings.Builder
	err := pyJSON{itemSep: ", ", keySep: ": "}.encode(&b, v, 0)
	return b.String(), err
}

func (e pyJSON) newline(b *strings.Builder, depth int) {
	b.WriteByte('\n')
	for i := 0; i < depth; i++ {
		b.WriteString(*e.indent)
	}
}

func (e pyJSON) encode(b *strings.Builder, v jinja.Value, depth int) error {
	switch {
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		switch {
		case math.IsNaN(f):
			b.WriteString("NaN")
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(PythonFloat(f))
		}
	case v.IsString():
		e.str(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				b.WriteString(e.itemSep)
			}
			if e.indent != nil {
				e.newline(b, depth+1)
			}
			if err := e.encode(b, item, depth+1); err != nil {
				return err
			}
		}
		if e.indent != nil {
			e.newline(b, depth)
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := append([]string(nil), d.Keys...)
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if e.sortKeys {
			sort.Strings(keys) // UTF-8 byte order is code point order, as Python sorts str
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(e.itemSep)
			}
			if e.indent != nil {
				e.newline(b, depth+1)
			}
			e.str(b, k)
			b.WriteString(e.keySep)
			item, _ := d.Get(k)
			if err := e.encode(b, item, depth+1); err != nil {
				return err
			}
		}
		if e.indent != nil {
			e.newline(b, depth)
		}
		b.WriteByte('}')
	case v.IsUndefined():
		return status.Errorf(status.InvalidArgument, "tojson: Object of type Undefined is not JSON serializable (the template encodes a missing value)")
	default:
		return status.Errorf(status.InvalidArgument, "tojson: Object of type %s is not JSON serializable", v.String())
	}
	return nil
}

// str writes a JSON string the way Python's json module does: ", \ and the control
// characters below U+0020 escaped (\n, \r, \t, \b, \f by name, the rest as \u00XX);
// with ensure_ascii every non-ASCII character as \uXXXX (UTF-16 surrogate pairs above
// U+FFFF); nothing else escaped (no HTML escaping, U+2028 and U+2029 kept).
func (e pyJSON) str(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		b.WriteString(`\u`)
		b.WriteByte(hex[r>>12&0xf])
		b.WriteByte(hex[r>>8&0xf])
		b.WriteByte(hex[r>>4&0xf])
		b.WriteByte(hex[r&0xf])
	}
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			u4(r)
		case e.ensureASCII && r > 0x7e:
			if r >= 0x10000 {
				r -= 0x10000
				u4(0xd800 + r>>10)
				u4(0xdc00 + r&0x3ff)
			} else {
				u4(r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// PythonFloat formats a finite float like Python's repr(float): the shortest digits that
// round-trip, in fixed notation with at least one decimal ("1.0", "0.0001", "-0.0") when
// the decimal exponent is in [-4, 16), otherwise in exponent notation with a signed,
// at-least-two-digit exponent ("1e-05", "1e+16", "1.5e+300").
func PythonFloat(f float64) string {
	if math.IsInf(f, 0) {
		if f > 0 {
			return "inf"
		}
		return "-inf"
	}
	if math.IsNaN(f) {
		return "nan"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // d[.ddd]e±XX
	_, exp, _ := strings.Cut(sci, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyMap is Jinja2's map filter: map(attribute=name[, default=...]) or map(filter_name,
// *args) for the filters chat templates map with; the engine's own map ignores a filter
// name and returns the list unchanged.
func pyMap(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "map: missing the sequence")
	}
	var items []jinja.Value
	switch seq := args[0]; {
	case seq.IsList():
		items = seq.AsList().Items
	case seq.IsDict():
		for _, k := range seq.AsDict().Keys {
			items = append(items, jinja.NewString(k))
		}
	case seq.IsUndefined():
	default:
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "map: %s is not iterable", seq.String())
	}
	out := make([]jinja.Value, len(items))
	if attr, ok := kwargs["attribute"]; ok {
		def, hasDefault := kwargs["default"]
		for i, item := range items {
			var v jinja.Value
			found := false
			if item.IsDict() {
				v, found = item.AsDict().Get(attr.AsString())
			}
			switch {
			case found:
				out[i] = v
			case hasDefault:
				out[i] = def
			default:
				out[i] = jinja.Undefined()
			}
		}
		return jinja.NewList(out), nil
	}
	if len(args) < 2 || !args[1].IsString() {
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "map: expected a filter name or attribute=")
	}
	name := args[1].AsString()
	for i, item := range items {
		var v jinja.Value
		var err error
		switch name {
		case "tojson":
			v, err = tojson(append([]jinja.Value{item}, args[2:]...), kwargs)
		case "string":
			v = jinja.NewString(pyStr(item))
		case "lower", "upper", "trim":
			if !item.IsString() {
				return jinja.Value{}, status.Errorf(status.InvalidArgument, "map(%q): item %s is not a string", name, item.String())
			}
			s := item.AsString()
			switch name {
			case "lower":
				s = strings.ToLower(s)
			case "upper":
				s = strings.ToUpper(s)
			default:
				s = strings.TrimSpace(s)
			}
			v = jinja.NewString(s)
		default:
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "map(%q): focus-go's template engine maps only tojson, string, lower, upper and trim", name)
		}
		if err != nil {
			return jinja.Value{}, err
		}
		out[i] = v
	}
	return jinja.NewList(out), nil
}

// pyStr is Python's str() of a template value (repr for the items of containers).
func pyStr(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return pyRepr(v)
}

// pyRepr is Python's repr() of a template value.
func pyRepr(v jinja.Value) string {
	switch {
	case v.IsNone():
		return "None"
	case v.IsBool():
		if v.AsBool() {
			return "True"
		}
		return "False"
	case v.IsInt():
		return strconv.FormatInt(v.AsInt(), 10)
	case v.IsFloat():
		return PythonFloat(v.AsFloat())
	case v.IsString():
		return pyStringRepr(v.AsString())
	case v.IsList():
		parts := make([]string, len(v.AsList().Items))
		for i, item := range v.AsList().Items {
			parts[i] = pyRepr(item)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.IsDict():
		d := v.AsDict()
		parts := make([]string, len(d.Keys))
		for i, k := range d.Keys {
			item, _ := d.Get(k)
			parts[i] = pyStringRepr(k) + ": " + pyRepr(item)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case v.IsUndefined():
		return ""
	}
	return v.String()
}

// pyStringRepr is Python's repr(str): single quotes unless the text holds ' and no ",
// backslash escapes for \\, the quote, \n, \r, \t and other non-printable characters.
func pyStringRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatInt(int64(r)|0x100, 16)[1:])
		case !unicode.IsPrint(r): // Python's str.isprintable: no Other or Separator but ' '
			if r < 0x100 {
				b.WriteString(`\x` + strconv.FormatInt(int64(r)|0x100, 16)[1:])
			} else if r < 0x10000 {
				b.WriteString(`\u` + strconv.FormatInt(int64(r)|0x10000, 16)[1:])
			} else {
				b.WriteString(`\U` + strconv.FormatInt(int64(r)|0x100000000, 16)[1:])
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyTypeName is Python's type(v).__name__ for a template value.
func pyTypeName(v jinja.Value) string {
	switch {
	case v.IsNone():
		return "NoneType"
	case v.IsBool():
		return "bool"
	case v.IsInt():
		return "int"
	case v.IsFloat():
		return "float"
	case v.IsString():
		return "str"
	case v.IsList():
		return "list"
	case v.IsDict():
		return "dict"
	case v.IsUndefined():
		return "Undefined"
	}
	return "function"
}

func isPyNumber(v jinja.Value) bool { return v.IsInt() || v.IsFloat() || v.IsBool() }

func pyNumber(v jinja.Value) (int64, float64) {
	switch {
	case v.IsInt():
		return v.AsInt(), float64(v.AsInt())
	case v.IsBool():
		if v.AsBool() {
			return 1, 1
		}
		return 0, 0
	}
	return 0, v.AsFloat()
}

// pyAdd is Python's a + b inside a template: str + str, list + list and numbers add;
// anything else raises as Python does (TypeError, or UndefinedError for a missing value,
// which is also what a null message field becomes). The third argument is the source of
// the expression, for the error.
func pyAdd(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 3 {
		return jinja.Value{}, status.Errorf(status.Internal, "chat: %s takes 3 arguments, got %d", addFunc, len(args))
	}
	a, b, src := args[0], args[1], args[2].AsString()
	switch {
	case a.IsUndefined() || b.IsUndefined():
		return jinja.Value{}, status.Errorf(status.InvalidArgument,
			"chat: the template computes %s with a missing value (a key the message does not have, or one whose value is null, which transformers drops): Jinja2 raises UndefinedError here", src)
	case a.IsString() && b.IsString():
		return jinja.NewString(a.AsString() + b.AsString()), nil
	case a.IsList() && b.IsList():
		items := append(append(make([]jinja.Value, 0, a.AsList().Len()+b.AsList().Len()), a.AsList().Items...), b.AsList().Items...)
		return jinja.NewList(items), nil
	case isPyNumber(a) && isPyNumber(b):
		ai, af := pyNumber(a)
		bi, bf := pyNumber(b)
		if a.IsFloat() || b.IsFloat() {
			return jinja.NewFloat(af + bf), nil
		}
		return jinja.NewInt(ai + bi), nil
	case a.IsString() || a.IsList():
		return jinja.Value{}, status.Errorf(status.InvalidArgument,
			"chat: the template computes %s: TypeError: can only concatenate %s (not \"%s\") to %s", src, pyTypeName(a), pyTypeName(b), pyTypeName(a))
	}
	return jinja.Value{}, status.Errorf(status.InvalidArgument,
		"chat: the template computes %s: TypeError: unsupported operand type(s) for +: '%s' and '%s'", src, pyTypeName(a), pyTypeName(b))
}

// pyIn is Python's item in container inside a template (an undefined container is empty,
// as Jinja2's Undefined iterates).
func pyIn(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 3 {
		return jinja.Value{}, status.Errorf(status.Internal, "chat: %s takes 3 arguments, got %d", inFunc, len(args))
	}
	item, c, src := args[0], args[1], args[2].AsString()
	switch {
	case c.IsUndefined():
		return jinja.NewBool(false), nil
	case c.IsString():
		if !item.IsString() {
			return jinja.Value{}, status.Errorf(status.InvalidArgument,
				"chat: the template computes %s: TypeError: 'in <string>' requires string as left operand, not %s", src, pyTypeName(item))
		}
		return jinja.NewBool(strings.Contains(c.AsString(), item.AsString())), nil
	case c.IsList():
		for _, x := range c.AsList().Items {
			if x.Equals(item) {
				return jinja.NewBool(true), nil
			}
		}
		return jinja.NewBool(false), nil
	case c.IsDict():
		if !item.IsString() {
			return jinja.NewBool(false), nil
		}
		return jinja.NewBool(c.AsDict().Has(item.AsString())), nil
	}
	return jinja.Value{}, status.Errorf(status.InvalidArgument,
		"chat: the template computes %s: TypeError: argument of type '%s' is not iterable", src, pyTypeName(c))
}

// pyIterable is Jinja2's `is iterable`: strings, lists, dicts and undefined values (which
// iterate as empty) are; None, numbers and booleans are not.
func pyIterable(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) != 1 {
		return jinja.Value{}, status.Errorf(status.Internal, "chat: %s takes 1 argument, got %d", iterableFunc, len(args))
	}
	v := args[0]
	return jinja.NewBool(v.IsString() || v.IsList() || v.IsDict() || v.IsUndefined()), nil
}

// pyDictMethod is a dict method call x.name(args...) inside a template (args: x, name,
// then the call's own arguments): items, keys, values and get, as Python's dict has them;
// on anything but a dict it raises as Python does.
func pyDictMethod(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) < 2 || !args[1].IsString() {
		return jinja.Value{}, status.Errorf(status.Internal, "chat: bad method call")
	}
	obj, name, rest := args[0], args[1].AsString(), args[2:]
	if !obj.IsDict() {
		if obj.IsUndefined() {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "the template calls %s() on a missing value", name)
		}
		return jinja.Value{}, status.Errorf(status.InvalidArgument, "'%s' object has no attribute '%s'", pyTypeName(obj), name)
	}
	d := obj.AsDict()
	items := make([]jinja.Value, 0, d.Len())
	switch name {
	case "get":
		if len(rest) == 0 || len(rest) > 2 {
			return jinja.Value{}, status.Errorf(status.InvalidArgument, "get expected 1 or 2 arguments, got %d", len(rest))
		}
		if rest[0].IsString() {
			if v, ok := d.Get(rest[0].AsString()); ok {
				return v, nil
			}
		}
		if len(rest) == 2 {
			return rest[1], nil
		}
		return jinja.None(), nil
	case "items":
		for _, k := range d.Keys {
			items = append(items, jinja.NewList([]jinja.Value{jinja.NewString(k), d.Data[k]}))
		}
	case "keys":
		for _, k := range d.Keys {
			items = append(items, jinja.NewString(k))
		}
	case "values":
		for _, k := range d.Keys {
			items = append(items, d.Data[k])
		}
	}
	return jinja.NewList(items), nil
}
