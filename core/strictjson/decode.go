package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
)

// Decoder checks and decodes documents under one set of Options.
type Decoder struct {
	opts   Options
	shapes sync.Map // reflect.Type -> *shape
}

// NewDecoder returns a Decoder that reads types as opts says.
func NewDecoder(opts Options) *Decoder {
	return &Decoder{opts: opts}
}

var plain = NewDecoder(Options{})

// Decode checks and decodes data, the document named input, into v (a pointer) with no
// Options: see Decoder.Decode.
func Decode(input string, data []byte, v any) error {
	return plain.Decode(input, data, v)
}

// jsonAPI decodes a document once it is checked: json-iterator with the standard
// library's rules, as at the rest of the C boundary. The check has already made its
// case-insensitive key matching moot: only exact keys reach it.
var jsonAPI = jsoniter.ConfigCompatibleWithStandardLibrary

// Decode checks data, the document named input ("tree", "collection spec"), against v's
// type (v is a pointer), then decodes it into v. A document that does not fit is
// status.InvalidArgument wrapping a *ValueError or an *UnknownKeyError, whose message
// names the input, the path of the value and what is allowed.
func (d *Decoder) Decode(input string, data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return status.Errorf(status.Internal, "strictjson: %s decodes into %v, not a pointer", input, t)
	}
	if err := d.Check(input, data, t.Elem()); err != nil {
		return err
	}
	var err error
	if u, ok := v.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(data) // called here, its error keeps its code and words
	} else {
		err = jsonAPI.Unmarshal(data, v)
	}
	var coded *status.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &coded):
		return status.Wrap(status.CodeOf(err), err, "%s", input)
	}
	return status.Wrap(status.InvalidArgument, err, "%s: bad JSON", input)
}

// Check checks data, the document named input, against type t without decoding it.
func (d *Decoder) Check(input string, data []byte, t reflect.Type) error {
	if err := check(input, data, d.shapeOf(t)); err != nil {
		return status.Wrap(status.InvalidArgument, err, "") // the message names the input
	}
	return nil
}

// shapeOf is t's shape, built once per type.
func (d *Decoder) shapeOf(t reflect.Type) *shape {
	if s, ok := d.shapes.Load(t); ok {
		return s.(*shape)
	}
	s := d.opts.build(t, map[reflect.Type]*shape{})
	d.shapes.Store(t, s)
	return s
}
