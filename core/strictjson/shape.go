package strictjson

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// shape is what a JSON value of some Go type may be, at every depth.
type shape struct {
	kind shapeKind
	// order indexes an object's keys (structKind) in declaration order, fields their
	// shapes in that order, allowed the keys sorted.
	order   map[string]int
	fields  []*shape
	allowed []string
	// elem checks a list's items, a map's values, a pointer's target.
	elem *shape
	// bits is a number's size in bits; ilo and ihi an integer's range.
	bits int
	ilo  int64
	ihi  uint64
}

type shapeKind uint8

const (
	anyKind     shapeKind = iota // any well-formed JSON (an interface, raw JSON, content the caller owns)
	structKind                   // an object with fixed keys
	mapKind                      // an object with any keys and checked values
	listKind                     // a slice or an array
	pointerKind                  // null or elem
	floatKind
	intKind
	uintKind
	stringKind
	boolKind
)

// want says what a value of s may be, for an error's "... is required".
func (s *shape) want() string {
	switch s.kind {
	case structKind, mapKind:
		return "an object"
	case listKind:
		return "a list"
	case pointerKind:
		return s.elem.want() + " or null"
	case floatKind:
		return "a finite number"
	case intKind:
		if s.bits == 64 {
			return "an integer"
		}
		return fmt.Sprintf("an integer in [%d, %d]", s.ilo, s.ihi)
	case uintKind:
		if s.bits == 64 {
			return "an integer >= 0"
		}
		return fmt.Sprintf("an integer in [0, %d]", s.ihi)
	case stringKind:
		return "a string"
	case boolKind:
		return "true or false"
	}
	return "a JSON value"
}

// Options says how to read types whose JSON form is not their fields'.
type Options struct {
	// Forms maps a type to the type whose JSON form it reads: a type with its own
	// UnmarshalJSON to the type whose fields are its keys, or a type read in another unit
	// (time.Duration read as seconds: float64).
	Forms map[reflect.Type]reflect.Type
	// Opaque are types whose content the caller owns: any well-formed JSON is accepted.
	Opaque map[reflect.Type]bool
}

// build derives t's shape. building holds the struct shapes under construction, for
// types that contain themselves.
func (o *Options) build(t reflect.Type, building map[reflect.Type]*shape) *shape {
	if form, ok := o.Forms[t]; ok {
		t = form
	} else if o.Opaque[t] || SelfDecoding(t) || t == rawMessageType {
		return &shape{kind: anyKind}
	}
	switch t.Kind() {
	case reflect.Interface:
		return &shape{kind: anyKind}
	case reflect.Pointer:
		return &shape{kind: pointerKind, elem: o.build(t.Elem(), building)}
	case reflect.Slice, reflect.Array:
		return &shape{kind: listKind, elem: o.build(t.Elem(), building)}
	case reflect.Map:
		return &shape{kind: mapKind, elem: o.build(t.Elem(), building)}
	case reflect.Struct:
		if s, ok := building[t]; ok {
			return s
		}
		s := &shape{kind: structKind, order: map[string]int{}}
		building[t] = s
		for _, f := range Fields(t) {
			s.order[f.Name] = len(s.fields)
			s.fields = append(s.fields, o.build(f.Type, building))
			s.allowed = append(s.allowed, f.Name)
		}
		slices.Sort(s.allowed)
		return s
	case reflect.Float32:
		return &shape{kind: floatKind, bits: 32}
	case reflect.Float64:
		return &shape{kind: floatKind, bits: 64}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return &shape{kind: intKind, bits: bits, ilo: -1 << (bits - 1), ihi: 1<<(bits-1) - 1}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		bits := t.Bits()
		return &shape{kind: uintKind, bits: bits, ihi: math.MaxUint64 >> (64 - bits)}
	case reflect.String:
		return &shape{kind: stringKind}
	case reflect.Bool:
		return &shape{kind: boolKind}
	}
	return &shape{kind: anyKind}
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	unmarshalers   = []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()}
)

// SelfDecoding reports a type with its own JSON decoder (UnmarshalJSON or
// UnmarshalText), whose keys its fields do not tell.
func SelfDecoding(t reflect.Type) bool {
	for _, u := range unmarshalers {
		if t.Implements(u) || reflect.PointerTo(t).Implements(u) {
			return true
		}
	}
	return false
}

// Field is one key of a struct's JSON object.
type Field struct {
	Name string
	Type reflect.Type
}

// Fields are struct t's JSON keys in declaration order, as encoding/json names them:
// the tag's name, else the field's; "-" skipped; the fields of an untagged embedded struct
// in its place, except those whose name a field of t itself takes.
func Fields(t reflect.Type) []Field {
	own := map[string]bool{}
	for i := range t.NumField() {
		if name, ok := fieldName(t.Field(i)); ok {
			own[name] = true
		}
	}
	var out []Field
	seen := map[string]bool{}
	add := func(f Field) {
		if !seen[f.Name] {
			seen[f.Name] = true
			out = append(out, f)
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if inner, ok := embeddedStruct(f); ok {
			for _, g := range Fields(inner) {
				if !own[g.Name] {
					add(g)
				}
			}
		} else if name, ok := fieldName(f); ok {
			add(Field{name, f.Type})
		}
	}
	return out
}

// fieldName is f's JSON key; false for a field JSON skips and for an embedded struct.
func fieldName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if _, ok := embeddedStruct(f); ok || tag == "-" || !f.IsExported() {
		return "", false
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name, true
	}
	return f.Name, true
}

// embeddedStruct is the struct type of an untagged embedded field, whose keys JSON lifts
// into the outer object.
func embeddedStruct(f reflect.StructField) (reflect.Type, bool) {
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); !f.Anonymous || name != "" {
		return nil, false
	}
	t := f.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, t.Kind() == reflect.Struct
}
