package tree

import (
	"io"

	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/status"
	"github.com/focus-go/focus-go/core/strictjson"
)

// The JSON form is the Tree struct's tags: {"problem_id", "nodes": [{"id",
// "parent", "children", "depth", "spans": [{"tokens", "trainable",
// "logprobs"}], "reward", "text", "observation", "done", "truncated",
// "failed", "critic", "search_pass", "inexact" (left out when ""), "off_policy" (left out when false), "weight_version" (left out when "")}], "stats": {...}}. Floats use the
// shortest representation that parses back to the same bits, so a round trip
// is lossless. It is read strictly (core/strictjson): keys match exactly, so a
// misspelt key or one in another case is an error naming the key meant, not a
// silently defaulted value; NaN, Infinity and out-of-range numbers are refused
// by name, and every refusal names the value's path ("tree: nodes[3].reward is
// NaN; a finite number is required").
var jsonAPI = jsoniter.Config{
	EscapeHTML:             false,
	SortMapKeys:            true,
	ValidateJsonRawMessage: true,
}.Froze()

// nodeWire is Node as read: pointers make the structural fields required
// instead of silently defaulting to 0 (which would attach a node to the root).
type nodeWire struct {
	ID            *int             `json:"id"`
	Parent        *int             `json:"parent"`
	Children      []int            `json:"children"`
	Depth         *int             `json:"depth"`
	Spans         []PackedSequence `json:"spans"`
	Reward        float64          `json:"reward"`
	Text          string           `json:"text"`
	Observation   string           `json:"observation"`
	Done          bool             `json:"done"`
	Truncated     bool             `json:"truncated"`
	Failed        string           `json:"failed"`
	Critic        *float64         `json:"critic"`
	SearchPass    int              `json:"search_pass"`
	Inexact       string           `json:"inexact"`
	OffPolicy     bool             `json:"off_policy"`
	WeightVersion string           `json:"weight_version"`
}

type treeWire struct {
	ProblemID string     `json:"problem_id"`
	Nodes     []nodeWire `json:"nodes"`
	Stats     Stats      `json:"stats"`
}

// Marshal validates t and encodes it as JSON.
func Marshal(t *Tree) ([]byte, error) {
	if err := t.validate(true); err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "tree: marshal")
	}
	data, err := jsonAPI.Marshal(t)
	if err != nil {
		return nil, status.Wrap(status.Internal, err, "tree: marshal")
	}
	return data, nil
}

// Unmarshal decodes a JSON tree and validates it; its nodes' spans count as
// checked on entry, as AddChild's do.
func Unmarshal(data []byte) (*Tree, error) {
	var w treeWire
	if err := strictjson.Decode("tree", data, &w); err != nil {
		return nil, err
	}
	return fromWire(&w)
}

// Encode writes t as one JSON document to w.
func Encode(w io.Writer, t *Tree) error {
	data, err := Marshal(t)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// Decode reads r to its end, one JSON tree, and validates it, like Unmarshal.
func Decode(r io.Reader) (*Tree, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "tree: read")
	}
	return Unmarshal(data)
}

func fromWire(w *treeWire) (*Tree, error) {
	t := &Tree{ProblemID: w.ProblemID, Nodes: make([]Node, len(w.Nodes)), Stats: w.Stats}
	for i := range w.Nodes {
		nw := &w.Nodes[i]
		for _, f := range [...]struct {
			name string
			v    *int
		}{{"id", nw.ID}, {"parent", nw.Parent}, {"depth", nw.Depth}} {
			if f.v == nil {
				return nil, status.Wrap(status.InvalidArgument, invalid(i, f.name, "missing; an integer is required"), "tree")
			}
		}
		t.Nodes[i] = Node{
			ID: *nw.ID, Parent: *nw.Parent, Children: nw.Children, Depth: *nw.Depth,
			Spans: nw.Spans, Reward: nw.Reward, Text: nw.Text, Observation: nw.Observation,
			Done: nw.Done, Truncated: nw.Truncated, Failed: nw.Failed, Critic: nw.Critic,
			SearchPass: nw.SearchPass, Inexact: nw.Inexact, OffPolicy: nw.OffPolicy, WeightVersion: nw.WeightVersion,
		}
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	for id := 1; id < len(t.Nodes); id++ {
		t.stamp(id)
	}
	return t, nil
}
