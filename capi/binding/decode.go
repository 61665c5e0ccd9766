package binding

import (
	"maps"
	"reflect"
	"time"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/strictjson"
)

// UnknownKeyError is a key an input's Go type does not declare (strictjson.UnknownKeyError).
type UnknownKeyError = strictjson.UnknownKeyError

// decoder reads the inputs: a type with its own decoder through the form keyTypes gives
// it, a Duration as seconds, content the caller owns (opaqueTypes) as any well-formed JSON.
var decoder = strictjson.NewDecoder(strictjson.Options{
	Forms: func() map[reflect.Type]reflect.Type {
		forms := maps.Clone(keyTypes)
		forms[reflect.TypeFor[time.Duration]()] = reflect.TypeFor[float64]()
		return forms
	}(),
	Opaque: func() map[reflect.Type]bool {
		opaque := map[reflect.Type]bool{}
		for t := range opaqueTypes {
			opaque[t] = true
		}
		return opaque
	}(),
})

// Decode reads data, the JSON input named what, into v (a pointer), after checking it
// against v's type at any depth (core/strictjson): a key v's type does not declare (one
// in another case included) is status.InvalidArgument wrapping an *UnknownKeyError; a
// value of the wrong type, NaN, Infinity, a number out of range, a key given twice or
// malformed JSON is status.InvalidArgument wrapping a *strictjson.ValueError, whose message
// names the input, the value's path, what was wrong and what is allowed ("batch:
// actor[0].weight is NaN; a finite number is required"). A published input (see Inputs)
// must be decoded into its declared type: anything else is a bug, reported as
// status.Internal.
func Decode(what string, data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return status.Errorf(status.Internal, "binding: %s decodes into %v, not a pointer", what, t)
	}
	if in, ok := inputsByName[what]; ok && in.Type != t.Elem() {
		return status.Errorf(status.Internal, "binding: %s decodes into %v, but the schema declares %v", what, t.Elem(), in.Type)
	}
	return decoder.Decode(what, data, v)
}
