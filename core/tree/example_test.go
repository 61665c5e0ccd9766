package tree_test

import (
	"fmt"

	"github.com/focus-go/focus-go/core/tree"
)

func Example() {
	prompt := tree.PackedSequence{Tokens: []uint32{101, 102}, Trainable: []bool{false, false}, Logprobs: []float64{0, 0}}
	t := tree.New("gsm8k-17", prompt, "Q: 2+2?")
	// One segment: a chat-template glue token, then two generated tokens.
	seg := tree.PackedSequence{Tokens: []uint32{7, 52, 53}, Trainable: []bool{false, true, true}, Logprobs: []float64{0, -0.1, -0.2}}
	a, _ := t.AddChild(0, tree.Node{Spans: []tree.PackedSequence{seg}, Text: " A: 4"})
	done := tree.PackedSequence{Tokens: []uint32{2}, Trainable: []bool{true}, Logprobs: []float64{-0.01}}
	leaf, _ := t.AddChild(a, tree.Node{Spans: []tree.PackedSequence{done}, Text: ".", Done: true, Reward: 1})

	fmt.Println(t.ContextTokens(leaf), t.PathKey(leaf), t.Nodes[leaf].Depth)
	fmt.Printf("%q\n", t.ContextText(leaf))
	data, _ := tree.Marshal(t)
	back, err := tree.Unmarshal(data)
	fmt.Println(len(back.Nodes), err)
	// Output:
	// [101 102 7 52 53 2] [0 0] 2
	// "Q: 2+2? A: 4."
	// 3 <nil>
}

// Revalidate re-reads the tokens only of spans that did not enter the tree
// through AddChild or Unmarshal: replacing a span slice after insertion is
// caught, a tree literal is checked in full.
func ExampleTree_Revalidate() {
	prompt := tree.PackedSequence{Tokens: []uint32{101}, Trainable: []bool{false}, Logprobs: []float64{0}}
	t := tree.New("p", prompt, "Q")
	gen := tree.PackedSequence{Tokens: []uint32{5}, Trainable: []bool{true}, Logprobs: []float64{-0.5}}
	id, _ := t.AddChild(0, tree.Node{Spans: []tree.PackedSequence{gen}, Done: true, Reward: 1})
	fmt.Println(t.Revalidate())

	t.Nodes[id].Spans = []tree.PackedSequence{{Tokens: []uint32{5}, Trainable: []bool{true}}}
	fmt.Println(t.Revalidate())

	lit := &tree.Tree{ProblemID: "p", Nodes: []tree.Node{
		{ID: 0, Parent: -1, Children: []int{1}, Spans: []tree.PackedSequence{prompt}},
		{ID: 1, Parent: 0, Depth: 1, Spans: []tree.PackedSequence{{Tokens: []uint32{5}}}, Done: true},
	}}
	fmt.Println(lit.Revalidate())
	// Output:
	// <nil>
	// tree: node 1 spans[0].logprobs: has 0 entries for 1 tokens
	// tree: node 1 spans[0].trainable: has 0 entries for 1 tokens
}
