package prepare

import (
	jsoniter "github.com/json-iterator/go"

	"github.com/focus-go/focus-go/core/tree"
)

// CriticSample pairs a checkpoint's context text with its target return.
//
// Samples made by Prepare or CriticTargets store only the tree and node id and
// build the context text when it is read: a context is O(depth x text), so
// writing every one at preparation time would cost more than the whole
// backup. Samples made with NewCriticSample carry their context.
type CriticSample struct {
	NodeID      int
	Target      float64
	Diagnostics Diagnostics

	src     *tree.Tree // prepared samples: the context is src's path to NodeID
	context string
}

// NewCriticSample builds a sample with an explicit context (what a Python
// caller passes as CriticSample(context=...)).
func NewCriticSample(nodeID int, context string, target float64, diag Diagnostics) CriticSample {
	return CriticSample{NodeID: nodeID, Target: target, Diagnostics: diag, context: context}
}

// Context is the checkpoint's context text: the edge texts from the root
// prompt to the node, as the critic read it.
func (c *CriticSample) Context() string {
	if c.src == nil {
		return c.context
	}
	return c.src.ContextText(c.NodeID)
}

// ContextLen is the byte length of Context.
func (c *CriticSample) ContextLen() int {
	if c.src == nil {
		return len(c.context)
	}
	n := 0
	for id := c.NodeID; id >= 0; id = c.src.Nodes[id].Parent {
		n += len(c.src.Nodes[id].Text)
	}
	return n
}

// AppendContext appends Context to dst without an intermediate string.
func (c *CriticSample) AppendContext(dst []byte) []byte {
	if c.src == nil {
		return append(dst, c.context...)
	}
	return appendText(dst, c.src, c.NodeID)
}

func appendText(dst []byte, t *tree.Tree, id int) []byte {
	if id < 0 {
		return dst
	}
	return append(appendText(dst, t, t.Nodes[id].Parent), t.Nodes[id].Text...)
}

// CriticSampleJSON is the JSON form of a CriticSample, context included: its keys are
// the keys a critic sample of a batch's JSON may hold.
type CriticSampleJSON struct {
	NodeID      int         `json:"node_id"`
	Context     string      `json:"context"`
	Target      float64     `json:"target"`
	Diagnostics Diagnostics `json:"diagnostics"`
}

// MarshalJSON encodes the sample with its context text.
func (c CriticSample) MarshalJSON() ([]byte, error) {
	return jsoniter.ConfigCompatibleWithStandardLibrary.Marshal(CriticSampleJSON{c.NodeID, c.Context(), c.Target, c.Diagnostics})
}

// UnmarshalJSON decodes a sample with an explicit context.
func (c *CriticSample) UnmarshalJSON(data []byte) error {
	var w CriticSampleJSON
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = NewCriticSample(w.NodeID, w.Context, w.Target, w.Diagnostics)
	return nil
}
