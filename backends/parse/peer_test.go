package parse

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/focus-go/focus-go/core/action"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerCase is one case of testdata/peer_cases.json: a model's reply, the profile that reads
// it and what the reply holds (see the file's "about").
type peerCase struct {
	Name       string            `json:"name"`
	Peer       string            `json:"peer"`
	Profile    string            `json:"profile"`
	Tools      []json.RawMessage `json:"tools"`
	Text       string            `json:"text"`
	StopReason string            `json:"stop_reason"`
	Calls      []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Error     string          `json:"error"`
	} `json:"calls"`
	Content   string `json:"content"`
	Reasoning string `json:"reasoning"`
	Note      string `json:"note"`
}

func loadPeerCases(t testing.TB) []peerCase {
	data, err := os.ReadFile(filepath.Join("testdata", "peer_cases.json"))
	require.NoError(t, err)
	var file struct {
		Cases []peerCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	require.NotEmpty(t, file.Cases)
	return file.Cases
}

// peerMismatch says how turn differs from what c expects ("" when it does not).
func peerMismatch(c peerCase, turn action.ToolTurn) string {
	var diffs []string
	if len(turn.ToolCalls) != len(c.Calls) {
		diffs = append(diffs, "calls: got "+describeCalls(turn.ToolCalls))
	} else {
		for i, want := range c.Calls {
			got := turn.ToolCalls[i]
			switch {
			case got.Name != want.Name:
				diffs = append(diffs, "call name: got "+got.Name+", want "+want.Name)
			case want.Error != "" && !strings.Contains(got.Error, want.Error):
				diffs = append(diffs, "call "+want.Name+": got error "+strings.TrimSpace(got.Error+" (none)")+", want one containing "+want.Error)
			case want.Error == "" && got.Malformed():
				diffs = append(diffs, "call "+want.Name+" is malformed: "+got.Error)
			case want.Error == "" && !jsonEqual(got.Arguments, string(want.Arguments)):
				diffs = append(diffs, "call "+want.Name+" arguments: got "+got.Arguments+", want "+string(want.Arguments))
			}
		}
	}
	if turn.Text != c.Content {
		diffs = append(diffs, "text: got "+jsonQuote(turn.Text)+", want "+jsonQuote(c.Content))
	}
	if turn.Reasoning != c.Reasoning {
		diffs = append(diffs, "reasoning: got "+jsonQuote(turn.Reasoning)+", want "+jsonQuote(c.Reasoning))
	}
	return strings.Join(diffs, "; ")
}

func describeCalls(calls []action.ToolCall) string {
	data, _ := json.Marshal(calls)
	return string(data)
}

func jsonQuote(s string) string { data, _ := json.Marshal(s); return string(data) }

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestPeerCases runs the cases ported from SGLang's and vLLM's parser tests (and the inputs
// of issue #15) through the parser of each case's profile.
func TestPeerCases(t *testing.T) {
	for _, c := range loadPeerCases(t) {
		t.Run(c.Profile+"/"+c.Name, func(t *testing.T) {
			p, err := ForProfile(c.Profile, c.Tools)
			require.NoError(t, err)
			a, err := p.Parse(action.Result{Text: c.Text, StopReason: c.StopReason})
			require.NoError(t, err)
			require.NotNil(t, a.Turn)
			assert.Empty(t, peerMismatch(c, *a.Turn), "%s\ninput %q", c.Peer, c.Text)
			for _, call := range a.Turn.ToolCalls {
				if !call.Malformed() {
					assert.True(t, isJSONObject([]byte(call.Arguments)), "arguments %q are not a JSON object", call.Arguments)
				}
			}
		})
	}
}
