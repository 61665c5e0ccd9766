package parse

import (
	"encoding/json"
	"strings"
)

// paramSchema is the part of a JSON schema that says which JSON types a value may take:
// "type" (a name or a list of names) and the alternatives of anyOf / oneOf / allOf, as
// Pydantic writes Optional[X] ({"anyOf": [{"type": "string"}, {"type": "null"}]}).
type paramSchema struct {
	Type  json.RawMessage `json:"type"`
	AnyOf []paramSchema   `json:"anyOf"`
	OneOf []paramSchema   `json:"oneOf"`
	AllOf []paramSchema   `json:"allOf"`
}

// types lists the JSON types the schema allows, in the order written (the alternatives of
// anyOf and friends in turn), without repeats; nil when the schema says nothing.
func (s paramSchema) types() []string {
	var out []string
	add := func(t string) {
		t = normalizeType(t)
		for _, x := range out {
			if x == t {
				return
			}
		}
		out = append(out, t)
	}
	var one string
	var many []string
	switch {
	case len(s.Type) == 0:
	case json.Unmarshal(s.Type, &one) == nil:
		add(one)
	case json.Unmarshal(s.Type, &many) == nil:
		for _, t := range many {
			add(t)
		}
	}
	for _, group := range [][]paramSchema{s.AnyOf, s.OneOf, s.AllOf} {
		for _, alt := range group {
			for _, t := range alt.types() {
				add(t)
			}
		}
	}
	return out
}

// normalizeType maps the type names models' tool schemas use besides JSON Schema's own
// (Python's int, float, bool, dict, list) to JSON Schema names.
func normalizeType(t string) string {
	switch t = strings.ToLower(strings.TrimSpace(t)); t {
	case "int":
		return "integer"
	case "float", "double":
		return "number"
	case "bool":
		return "boolean"
	case "dict":
		return "object"
	case "list":
		return "array"
	}
	return t
}

// toolParamTypes maps tool name → parameter name → the JSON types its schema allows.
// Tools are OpenAI form ({"type": "function", "function": {"name", "parameters"}}) or bare
// ({"name", "parameters"}). Schemas that do not decode are ignored: they were already
// rendered into the prompt, so a parse must not fail because of them.
func toolParamTypes(tools []json.RawMessage) map[string]map[string][]string {
	type function struct {
		Name       string `json:"name"`
		Parameters struct {
			Properties map[string]paramSchema `json:"properties"`
		} `json:"parameters"`
	}
	out := map[string]map[string][]string{}
	for _, raw := range tools {
		var schema struct {
			function
			Function *function `json:"function"`
		}
		if json.Unmarshal(raw, &schema) != nil {
			continue
		}
		fn := schema.function
		if schema.Function != nil {
			fn = *schema.Function
		}
		params := map[string][]string{}
		for p, s := range fn.Parameters.Properties {
			types := s.types()
			if types == nil {
				types = []string{} // declared, untyped: read as a literal
			}
			params[p] = types
		}
		out[fn.Name] = params
	}
	return out
}
