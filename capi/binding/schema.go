package binding

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/generate"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/search"
	"github.com/focus-go/focus-go/core/session"
	"github.com/focus-go/focus-go/core/strictjson"
)

// Schema is the contract as data: the published inputs, the object types they are made
// of, the configuration rules and the record keys. Its JSON (SchemaJSON) is what
// focus_schema returns and testdata/schema.json pins.
type Schema struct {
	Inputs []InputSchema `json:"inputs"`
	// Types are the object types the inputs are made of, by name ("generate.SamplingParams").
	Types   map[string]TypeSchema `json:"types"`
	Rules   RulesSchema           `json:"rules"`
	Records RecordsSchema         `json:"records"`
}

// InputSchema is one input: its name, the C exports that read it and its type.
type InputSchema struct {
	Name      string   `json:"name"`
	Functions []string `json:"functions"`
	Type      string   `json:"type"`
}

// TypeSchema is an object type's fields, in declaration order.
type TypeSchema struct {
	Fields []FieldSchema `json:"fields"`
}

// FieldSchema is one key of an object: its name, its type ("string", "integer",
// "number", "boolean", "seconds", "json" for any JSON value, an object type's name,
// "list of T", "map of T", "T or null") and, where an absent key means a value the
// library decides, that default.
type FieldSchema struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Default any    `json:"default,omitempty"`
}

// RulesSchema is what the rules decide (Check, DefaultValues): the kinds
// focus_rules_check accepts and the library's defaults (focus_rules_defaults).
type RulesSchema struct {
	Kinds    []string `json:"kinds"`
	Defaults Defaults `json:"defaults"`
}

// RecordsSchema are the trainer records' keys in order (core/export): an actor record's,
// a critic record's, and the keys a path-layout actor record has after the actor keys.
type RecordsSchema struct {
	Actor     []string `json:"actor"`
	Critic    []string `json:"critic"`
	PathExtra []string `json:"path_extra"`
}

// fieldDefaults are the defaults the schema states, by object type and key: what an absent
// key means, read from the packages that decide it.
func fieldDefaults() map[reflect.Type]map[string]any {
	d := DefaultValues()
	selective, err := Check(KindSelective, []byte(`{}`))
	if err != nil {
		panic(fmt.Sprintf("binding: Selective() does not pass the rules: %v", err))
	}
	return map[reflect.Type]map[string]any{
		reflect.TypeFor[session.Spec](): {
			"segments": d.Segments.Tokens, "max_segments": d.Agent.MaxSegments, "max_total_tokens": d.Agent.MaxTotalTokens,
			"routing_key": "", "reward": d.Reward, "allow_partial": false, "max_retries": 0, "stop_on_abort": false,
			"policy_timeout": 0, "env_timeout": 0, "critic_timeout": 0, "codec": 0, "critic": nil, "turn": nil, "resume": nil,
		},
		reflect.TypeFor[generate.SamplingParams](): {
			"temperature": d.Sampling.Temperature, "max_tokens": d.Sampling.MaxTokens, "top_p": d.Sampling.TopP,
		},
		reflect.TypeFor[prepare.RewardConfig](): objectOf(d.Reward),
		reflect.TypeFor[search.Config]():        objectOf(selective),
	}
}

// objectOf is v's JSON object as a map.
func objectOf(v any) map[string]any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		panic(err)
	}
	return m
}

// nullDefault is a default of JSON null (a nil any is "no default").
type nullDefault struct{}

func (nullDefault) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// Build assembles the schema from the inputs, the rules and the record keys.
func Build() Schema {
	defaults := fieldDefaults()
	s := Schema{
		Types: map[string]TypeSchema{},
		Rules: RulesSchema{Kinds: Kinds, Defaults: DefaultValues()},
		Records: RecordsSchema{Actor: export.ActorKeys, Critic: export.CriticKeys,
			PathExtra: export.PathKeys[len(export.ActorKeys):]},
	}
	var describe func(t reflect.Type) string
	describe = func(t reflect.Type) string {
		if name, ok := opaqueTypes[t]; ok {
			return name
		}
		keys, own := keyTypes[t]
		switch {
		case t == reflect.TypeFor[time.Duration]():
			return "seconds"
		case t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface:
			return "json"
		case !own && strictjson.SelfDecoding(t):
			panic(fmt.Sprintf("binding: %v decodes itself; declare its keys in keyTypes or opaqueTypes", t))
		}
		switch t.Kind() {
		case reflect.Pointer:
			return describe(t.Elem()) + " or null"
		case reflect.Slice, reflect.Array:
			return "list of " + describe(t.Elem())
		case reflect.Map:
			return "map of " + describe(t.Elem())
		case reflect.Bool:
			return "boolean"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return "integer"
		case reflect.Float32, reflect.Float64:
			return "number"
		case reflect.String:
			return "string"
		case reflect.Struct:
			name := t.String()
			if _, done := s.Types[name]; done {
				return name
			}
			s.Types[name] = TypeSchema{} // placeholder: a type may contain itself
			fieldsOf := t
			if own {
				fieldsOf = keys
			}
			var fields []FieldSchema
			for _, f := range strictjson.Fields(fieldsOf) {
				field := FieldSchema{Name: f.Name, Type: describe(f.Type)}
				if v, ok := defaults[t][f.Name]; ok {
					field.Default = v
					if v == nil {
						field.Default = nullDefault{}
					}
				}
				fields = append(fields, field)
			}
			s.Types[name] = TypeSchema{Fields: fields}
			return name
		}
		panic(fmt.Sprintf("binding: no schema type for %v", t))
	}
	for _, in := range Inputs {
		s.Inputs = append(s.Inputs, InputSchema{Name: in.Name, Functions: in.Functions, Type: describe(in.Type)})
	}
	return s
}

// SchemaJSON is Build's schema as indented JSON, built once.
var SchemaJSON = sync.OnceValue(func() []byte {
	data, err := json.MarshalIndent(Build(), "", "  ")
	if err != nil {
		panic(err)
	}
	return append(data, '\n')
})
