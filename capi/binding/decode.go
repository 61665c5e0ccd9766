package binding

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
)

// jsonAPI decodes the inputs: json-iterator with the standard library's rules, as at the
// rest of the C boundary.
var jsonAPI = jsoniter.ConfigCompatibleWithStandardLibrary

// UnknownKeyError is a key an input's Go type does not declare: a misspelt or unsupported
// setting, refused instead of ignored.
type UnknownKeyError struct {
	// Input names the input ("collection spec").
	Input string
	// Path is where the object holding Key sits in the input: "" at the top, else
	// "search", "policy", "result.native_tool_calls[0]".
	Path string
	// Key is the key that was sent.
	Key string
	// Allowed are the keys the object declares, sorted.
	Allowed []string
}

func (e *UnknownKeyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: unknown key %q", e.Input, e.Key)
	if e.Path != "" {
		fmt.Fprintf(&b, " in %s", e.Path)
	}
	if near := closest(e.Key, e.Allowed); near != "" {
		fmt.Fprintf(&b, ", did you mean %q?", near)
	}
	fmt.Fprintf(&b, " (allowed: %s)", strings.Join(e.Allowed, ", "))
	return b.String()
}

// Decode reads data, the JSON input named what, into v (a pointer), after checking that
// every object key in data is one that v's type declares, at any depth. An unknown key is
// status.InvalidArgument wrapping an *UnknownKeyError; malformed JSON is
// status.InvalidArgument "<what>: bad JSON: ...". A published input (see Inputs) must be
// decoded into its declared type: anything else is a bug, reported as status.Internal.
func Decode(what string, data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return status.Errorf(status.Internal, "binding: %s decodes into %v, not a pointer", what, t)
	}
	if in, ok := inputsByName[what]; ok && in.Type != t.Elem() {
		return status.Errorf(status.Internal, "binding: %s decodes into %v, but the schema declares %v", what, t.Elem(), in.Type)
	}
	if s := shapeOf(t.Elem()); s != nil {
		it := jsonAPI.BorrowIterator(data)
		err := s.check(it, what, "")
		jsonAPI.ReturnIterator(it)
		if err != nil {
			return status.Wrap(status.InvalidArgument, err, "") // the message names the input
		}
		// A syntax error stops the check silently: Unmarshal reports it below.
	}
	if err := jsonAPI.Unmarshal(data, v); err != nil {
		return status.Wrap(status.InvalidArgument, err, "%s: bad JSON", what)
	}
	return nil
}

// shape is the keys a JSON value of some Go type may hold, at every depth. A nil *shape
// checks nothing (a number, a string, raw JSON, a type with its own decoder).
type shape struct {
	kind shapeKind
	// fields are an object's keys (kind structShape); allowed the same, sorted.
	fields  map[string]*shape
	allowed []string
	// elem checks a list's items or a map's values (kind listShape, mapShape).
	elem *shape
}

type shapeKind int

const (
	structShape shapeKind = iota // a struct: fixed keys
	listShape                    // a slice or array
	mapShape                     // a map: any keys, checked values
)

// check walks the JSON value at it. It reports the first unknown key; a value of another
// JSON type than the shape expects is skipped (the decoder names the type error).
func (s *shape) check(it *jsoniter.Iterator, in, path string) error {
	var err error
	switch it.WhatIsNext() {
	case jsoniter.ObjectValue:
		if s.kind == listShape {
			it.Skip()
			return nil
		}
		it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
			child, at := s.elem, path+"["+strconv.Quote(key)+"]"
			if s.kind == structShape {
				var ok bool
				if child, ok = s.fields[key]; !ok {
					err = &UnknownKeyError{Input: in, Path: path, Key: key, Allowed: s.allowed}
					return false
				}
				at = join(path, key)
			}
			if child == nil {
				it.Skip()
			} else {
				err = child.check(it, in, at)
			}
			return err == nil
		})
	case jsoniter.ArrayValue:
		if s.kind != listShape {
			it.Skip()
			return nil
		}
		i := 0
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			err = s.elem.check(it, in, path+"["+strconv.Itoa(i)+"]")
			i++
			return err == nil
		})
	default:
		it.Skip()
	}
	return err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var (
	shapes         sync.Map // reflect.Type -> *shape (nil: checks nothing)
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	unmarshalers   = []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()}
)

// shapeOf is t's shape, built once per type.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

// buildShape derives t's shape from its json tags, as encoding/json reads them. building
// holds the struct shapes under construction, for types that contain themselves.
func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	if keys, ok := keyTypes[t]; ok {
		t = keys // a type with its own decoder whose keys another type declares
	} else if opaque(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return buildShape(t.Elem(), building)
	case reflect.Slice, reflect.Array:
		if elem := buildShape(t.Elem(), building); elem != nil {
			return &shape{kind: listShape, elem: elem}
		}
	case reflect.Map:
		if elem := buildShape(t.Elem(), building); elem != nil {
			return &shape{kind: mapShape, elem: elem}
		}
	case reflect.Struct:
		if s, ok := building[t]; ok {
			return s
		}
		s := &shape{kind: structShape, fields: map[string]*shape{}}
		building[t] = s
		for _, f := range jsonFields(t) {
			s.fields[f.name] = buildShape(f.typ, building)
			s.allowed = append(s.allowed, f.name)
		}
		slices.Sort(s.allowed)
		return s
	}
	return nil
}

// opaque reports a type whose JSON this package does not look into: raw JSON, an
// interface, a type with its own decoder, or content the caller owns (opaqueTypes).
func opaque(t reflect.Type) bool {
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return true
	}
	if _, ok := opaqueTypes[t]; ok {
		return true
	}
	for _, u := range unmarshalers {
		if t.Implements(u) || reflect.PointerTo(t).Implements(u) {
			return true
		}
	}
	return false
}

// jsonField is one key of a struct's JSON object.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields are struct t's JSON keys in declaration order, as encoding/json names them:
// the tag's name, else the field's; "-" skipped; the fields of an untagged embedded struct
// in its place, except those whose name a field of t itself takes.
func jsonFields(t reflect.Type) []jsonField {
	own := map[string]bool{}
	for i := range t.NumField() {
		if name, ok := fieldName(t.Field(i)); ok {
			own[name] = true
		}
	}
	var out []jsonField
	seen := map[string]bool{}
	add := func(f jsonField) {
		if !seen[f.name] {
			seen[f.name] = true
			out = append(out, f)
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if inner, ok := embeddedStruct(f); ok {
			for _, g := range jsonFields(inner) {
				if !own[g.name] {
					add(g)
				}
			}
		} else if name, ok := fieldName(f); ok {
			add(jsonField{name, f.Type})
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

// closest is the allowed key nearest to key (at most two edits away), or "".
func closest(key string, allowed []string) string {
	best, bestDist := "", 3
	for _, a := range allowed {
		if d := editDistance(key, a); d < bestDist {
			best, bestDist = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
