package strictjson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	jsoniter "github.com/json-iterator/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/strictjson"
)

type span struct {
	Tokens    []uint32  `json:"tokens"`
	Trainable []bool    `json:"trainable"`
	Logprobs  []float64 `json:"logprobs"`
}

type node struct {
	ID     *int     `json:"id"`
	Depth  int8     `json:"depth"`
	Reward float64  `json:"reward"`
	Critic *float64 `json:"critic"`
	Text   string   `json:"text"`
	Done   bool     `json:"done"`
	Spans  []span   `json:"spans"`
}

type doc struct {
	Nodes []node             `json:"nodes"`
	Ratio float32            `json:"ratio"`
	Extra map[string]float64 `json:"extra"`
	Raw   json.RawMessage    `json:"raw"`
	Any   any                `json:"any"`
	Stats *struct {
		Count int `json:"count"`
	} `json:"stats"`
}

// TestRefusals holds malformed documents of every kind: each refusal names the document,
// the value's path, what was wrong and what is allowed.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name, data, message, field string
	}{
		// Non-finite numbers, named as such (Python's json.dumps writes them).
		{"NaN", `{"nodes": [{"reward": NaN}]}`, "doc: nodes[0].reward is NaN; a finite number is required", "nodes[0].reward"},
		{"Infinity", `{"nodes": [{}, {"reward": Infinity}]}`, "doc: nodes[1].reward is Infinity; a finite number is required", "nodes[1].reward"},
		{"-Infinity", `{"nodes": [{"reward": -Infinity}]}`, "doc: nodes[0].reward is -Infinity; a finite number is required", "nodes[0].reward"},
		{"NaN in a pointer", `{"nodes": [{"critic": NaN}]}`, "doc: nodes[0].critic is NaN; a finite number or null is required", "nodes[0].critic"},
		{"NaN in a list", `{"nodes": [{"spans": [{"logprobs": [0, -0.5, NaN]}]}]}`,
			"doc: nodes[0].spans[0].logprobs[2] is NaN; a finite number is required", "nodes[0].spans[0].logprobs[2]"},
		{"NaN in a map", `{"extra": {"a": 1, "variance": NaN}}`, "doc: extra.variance is NaN; a finite number is required", "extra.variance"},
		{"NaN in free JSON", `{"any": {"x": [NaN]}}`, "doc: any.x[0] is NaN; a finite number is required", "any.x[0]"},
		{"Infinity in raw JSON", `{"raw": {"y": Infinity}}`, "doc: raw.y is Infinity; a finite number is required", "raw.y"},
		{"NaN for a string", `{"nodes": [{"text": NaN}]}`, "doc: nodes[0].text is NaN; a string is required", "nodes[0].text"},
		{"1e999", `{"nodes": [{"reward": 1e999}]}`, "doc: nodes[0].reward is 1e999, beyond the range of a 64-bit float; a finite number is required", "nodes[0].reward"},
		{"-1e999 in free JSON", `{"any": -1e999}`, "doc: any is -1e999, beyond the range of a 64-bit float; a finite number is required", "any"},
		{"beyond float32", `{"ratio": 1e39}`, "doc: ratio is 1e39, beyond the range of a 32-bit float; a finite number is required", "ratio"},
		// Integers.
		{"negative token", `{"nodes": [{"spans": [{"tokens": [1, 2, -1]}]}]}`,
			"doc: nodes[0].spans[0].tokens[2] is -1; an integer in [0, 4294967295] is required", "nodes[0].spans[0].tokens[2]"},
		{"token too large", `{"nodes": [{"spans": [{"tokens": [4294967296]}]}]}`,
			"doc: nodes[0].spans[0].tokens[0] is 4294967296, out of range; an integer in [0, 4294967295] is required", "nodes[0].spans[0].tokens[0]"},
		{"fraction for an integer", `{"nodes": [{"id": 1.5}]}`, "doc: nodes[0].id is 1.5; an integer or null is required", "nodes[0].id"},
		{"exponent for an integer", `{"stats": {"count": 1e3}}`, "doc: stats.count is 1e3; an integer is required", "stats.count"},
		{"int8 range", `{"nodes": [{"depth": -129}]}`, "doc: nodes[0].depth is -129, out of range; an integer in [-128, 127] is required", "nodes[0].depth"},
		{"huge integer", `{"stats": {"count": 123456789012345678901234}}`, "doc: stats.count is 123456789012345678901234, out of range; an integer is required", "stats.count"},
		// Wrong JSON types.
		{"string for a number", `{"nodes": [{"reward": "1"}]}`, `doc: nodes[0].reward is the string "1"; a finite number is required`, "nodes[0].reward"},
		{"null for a number", `{"nodes": [{"reward": null}]}`, "doc: nodes[0].reward is null; a finite number is required", "nodes[0].reward"},
		{"number for a string", `{"nodes": [{"text": 3}]}`, "doc: nodes[0].text is the number 3; a string is required", "nodes[0].text"},
		{"string for a boolean", `{"nodes": [{"done": "yes"}]}`, `doc: nodes[0].done is the string "yes"; true or false is required`, "nodes[0].done"},
		{"boolean for a list", `{"nodes": [{"spans": true}]}`, "doc: nodes[0].spans is true; a list is required", "nodes[0].spans"},
		{"object for a list", `{"nodes": {"0": {}}}`, "doc: nodes is an object; a list is required", "nodes"},
		{"list for an object", `{"nodes": [[]]}`, "doc: nodes[0] is a list; an object is required", "nodes[0]"},
		{"list at the top", `[]`, "doc: the document is a list; an object is required", ""},
		{"list of lists", `{"nodes": [{"spans": [[1, 2]]}]}`, "doc: nodes[0].spans[0] is a list; an object is required", "nodes[0].spans[0]"},
		// Keys.
		{"a key in another case", `{"nodes": [{"reward": 1, "Reward": 0}]}`,
			`doc: unknown key "Reward" in nodes[0] (keys are case-sensitive), did you mean "reward"? (allowed: critic, depth, done, id, reward, spans, text)`, ""},
		{"a misspelt key", `{"nodes": [{"rewrad": 1}]}`, `doc: unknown key "rewrad" in nodes[0], did you mean "reward"?`, ""},
		{"an unknown key", `{"trees": []}`, `doc: unknown key "trees" (allowed: any, extra, nodes, ratio, raw, stats)`, ""},
		{"a key twice", `{"nodes": [{"reward": 1, "reward": 0}]}`, "doc: nodes[0].reward is given twice; one value per key is required", "nodes[0].reward"},
		{"a map key twice", `{"extra": {"a": 1, "a": 2}}`, "doc: extra.a is given twice; one value per key is required", "extra.a"},
		// Syntax.
		{"cut off", `{"nodes": [{"reward": 1}, {"spans": [{"tokens": [1, 2`,
			"doc: bad JSON at byte 53 (in nodes[1].spans[0].tokens): the input ends before the value is complete (is it cut off?)", ""},
		{"cut off in a string", `{"nodes": [{"text": "abc`, "doc: bad JSON at byte 24 (in nodes[0].text): the input ends before the value is complete", ""},
		{"empty", "  ", "doc: bad JSON at byte 2: the input is empty", ""},
		{"trailing comma", `{"nodes": [{}, ]}`, "doc: bad JSON at byte 15 (in nodes[1]): expected a value, found ']'", ""},
		{"missing comma", `{"nodes": [{} {}]}`, "doc: bad JSON at byte 14 (in nodes): expected ',' or ']' after item 0, found '{'", ""},
		{"missing colon", `{"nodes" []}`, `doc: bad JSON at byte 9: expected ':' after the key "nodes", found '['`, ""},
		{"unquoted key", `{nodes: []}`, "doc: bad JSON at byte 1: expected a key (a string in double quotes), found 'n'", ""},
		{"two documents", `{} {}`, "doc: bad JSON at byte 3: more data follows the JSON value, starting with '{'", ""},
		{"bad escape", `{"nodes": [{"text": "a\qb"}]}`, `doc: bad JSON at byte 23 (in nodes[0].text): invalid escape \q in a string`, ""},
		{"control character", "{\"nodes\": [{\"text\": \"a\nb\"}]}", "doc: bad JSON at byte 22 (in nodes[0].text): a control character (U+000A) inside a string", ""},
		{"bare word", `{"any": nope}`, "doc: bad JSON at byte 8 (in any): expected a value, found nope", ""},
		{"deep nesting", `{"any": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "nested more than 10000 deep", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := strictjson.Decode("doc", []byte(tt.data), &d)
			require.Error(t, err)
			assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
			assert.Contains(t, err.Error(), tt.message)
			assert.Equal(t, tt.field, status.FieldOf(err))
		})
	}
}

func TestUnknownKeyError(t *testing.T) {
	var d doc
	err := strictjson.Decode("doc", []byte(`{"nodes": [{}, {"REWARD": 1}]}`), &d)
	var unknown *strictjson.UnknownKeyError
	require.True(t, errors.As(err, &unknown), "%v", err)
	assert.Equal(t, "doc", unknown.Input)
	assert.Equal(t, "nodes[1]", unknown.Path)
	assert.Equal(t, "REWARD", unknown.Key)
	assert.Equal(t, []string{"critic", "depth", "done", "id", "reward", "spans", "text"}, unknown.Allowed)
}

func TestDecodesWhatPasses(t *testing.T) {
	var d doc
	require.NoError(t, strictjson.Decode("doc", []byte(` {"nodes": [{"id": 0, "depth": -128, "re\u0077ard": -0.5e-3, "critic": null,
		"text": "a\"\\\u00e9", "done": true, "spans": [{"tokens": [0, 4294967295], "trainable": [false, true], "logprobs": [0, -1E+2]}]}],
		"ratio": 3.4e38, "extra": {"a": 1, "A": 2}, "raw": {"k": [1, "x", null, true]}, "any": -0, "stats": null} `), &d))
	require.Len(t, d.Nodes, 1)
	n := d.Nodes[0]
	assert.Equal(t, 0, *n.ID)
	assert.Equal(t, int8(-128), n.Depth)
	assert.Equal(t, -0.5e-3, n.Reward)
	assert.Nil(t, n.Critic)
	assert.Equal(t, "a\"\\é", n.Text)
	assert.Equal(t, []uint32{0, 4294967295}, n.Spans[0].Tokens)
	assert.Equal(t, []float64{0, -100}, n.Spans[0].Logprobs)
	assert.Equal(t, map[string]float64{"a": 1, "A": 2}, d.Extra)
	assert.JSONEq(t, `{"k": [1, "x", null, true]}`, string(d.Raw))
	assert.Nil(t, d.Stats)
}

// A type read through another form: its own decoder sees only input the form allows.
type seconds struct{ d time.Duration }

func (s *seconds) UnmarshalJSON(data []byte) error {
	var f float64
	err := json.Unmarshal(data, &f)
	s.d = time.Duration(f * float64(time.Second))
	return err
}

func TestForms(t *testing.T) {
	type config struct {
		Timeout seconds `json:"timeout"`
		Content any     `json:"content"`
	}
	dec := strictjson.NewDecoder(strictjson.Options{Forms: map[reflect.Type]reflect.Type{reflect.TypeFor[seconds](): reflect.TypeFor[float64]()}})
	var c config
	require.NoError(t, dec.Decode("config", []byte(`{"timeout": 1.5, "content": {"free": 1}}`), &c))
	assert.Equal(t, 1500*time.Millisecond, c.Timeout.d)
	err := dec.Decode("config", []byte(`{"timeout": "1s"}`), &c)
	assert.EqualError(t, err, `config: timeout is the string "1s"; a finite number is required`)
	// Without the form, the type's own decoder is trusted with any well-formed JSON.
	err = strictjson.Decode("config", []byte(`{"timeout": "1s"}`), &c)
	assert.ErrorContains(t, err, "config: bad JSON")
	err = dec.Decode("config", []byte(`{"timeout": 1}`), c)
	assert.Equal(t, status.Internal, status.CodeOf(err))
}

// FuzzDecode: whatever the bytes, Decode gives a value or an InvalidArgument error, never
// a panic; what it accepts, the plain decoder reads too, to the same value (the check only
// ever refuses).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"nodes": [{"id": 1, "reward": 0.5, "critic": null, "spans": [{"tokens": [1, 2]}]}]}`,
		`{"nodes": [{"reward": NaN}]}`, `{"extra": {"a": 1e999}}`, `{"any": [{"x": -Infinity}]}`, `{"raw": "\u00e9\n"}`,
		`{"nodes": [{"Reward": 1}]}`, `{"stats": {"count": -0}}`, `{"nodes": [{"depth": 127, "text": "a\"b"}]}`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict doc
		err := strictjson.Decode("doc", data, &strict)
		if err != nil {
			require.Equal(t, status.InvalidArgument, status.CodeOf(err), "%v", err)
			return
		}
		var plain doc
		require.NoError(t, jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &plain))
		assert.Equal(t, plain, strict)
	})
}
