package collect

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/core/status"
)

func TestRootMessages(t *testing.T) {
	tests := []struct {
		name, system, prompt, observation string
		want                              string // the messages as one JSON array
		err                               string
	}{
		{"prompt only", "", `"Solve x."`, ``, `[{"role":"user","content":"Solve x."}]`, ""},
		{"system prompt first", "Be brief.", `"Solve x."`, `null`, `[{"role":"system","content":"Be brief."},{"role":"user","content":"Solve x."}]`, ""},
		{"text joins the last user message", "", `"Solve x."`, `"Show your work."`, `[{"role":"user","content":"Solve x.\n\nShow your work."}]`, ""},
		{"keys keep their order", "", `[{"content":"Solve x.","name":"u","role":"user"}]`, `"More."`,
			`[{"content":"Solve x.\n\nMore.","name":"u","role":"user"}]`, ""},
		{"text after an assistant message is a new user message", "", `[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]`, `"c"`,
			`[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]`, ""},
		{"text after content parts is a new user message", "", `[{"role":"user","content":[{"type":"text","text":"a"}]}]`, `"c"`,
			`[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"user","content":"c"}]`, ""},
		{"empty text adds nothing", "", `"Solve x."`, `""`, `[{"role":"user","content":"Solve x."}]`, ""},
		{"messages are appended", "", `"Solve x."`, `[{"role":"tool","content":"42"}]`, `[{"role":"user","content":"Solve x."},{"role":"tool","content":"42"}]`, ""},
		{"bad prompt", "", `5`, ``, "", "problem prompt must be a string or a list of messages, got a JSON number"},
		{"bad prompt message", "", `["hi"]`, ``, "", "problem prompt: message 0 is a JSON string, expected an object"},
		{"bad observation", "", `"x"`, `{"text":"y"}`, "", "env.reset() returned a JSON object, expected str, list of messages or None"},
		{"bad observation message", "", `"x"`, `[1]`, "", "env.reset() observation: message 0 is a JSON number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RootMessages(tc.system, json.RawMessage(tc.prompt), json.RawMessage(tc.observation))
			if tc.err != "" {
				require.Error(t, err)
				assert.Equal(t, status.InvalidArgument, status.CodeOf(err))
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			parts := make([]string, len(got))
			for i, m := range got {
				parts[i] = string(m)
			}
			assert.Equal(t, tc.want, "["+strings.Join(parts, ",")+"]")
		})
	}
}

// FuzzRootMessages: any prompt and observation give valid JSON messages or an
// InvalidArgument error, and the prompt's own messages come through.
func FuzzRootMessages(f *testing.F) {
	f.Add("", `"Solve x."`, `"Show."`)
	f.Add("sys", `[{"content":"a","role":"user"}]`, `[{"role":"tool","content":"1"}]`)
	f.Add("", `[{"role":"user","content":[1]}]`, `"x"`)
	f.Add("", `[{"role":"user","content":"a","role":"assistant"}]`, `"x"`)
	f.Fuzz(func(t *testing.T, system, prompt, observation string) {
		got, err := RootMessages(system, json.RawMessage(prompt), json.RawMessage(observation))
		if err != nil {
			if status.CodeOf(err) != status.InvalidArgument {
				t.Fatalf("%v is not InvalidArgument", err)
			}
			return
		}
		for i, m := range got {
			var obj map[string]any
			if err := json.Unmarshal(m, &obj); err != nil {
				t.Fatalf("message %d %q is not a JSON object: %v", i, m, err)
			}
		}
	})
}
