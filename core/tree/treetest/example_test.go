package treetest_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/focus-go/focus-go/core/tree/treetest"
)

func Example() {
	fig := treetest.Figure61()
	fmt.Println(fig.Len(), fig.Root().Children, fig.Nodes[1].Children)

	chains := treetest.Chains([]float64{1, 0, 1}, 2, 4, 0.5)
	fmt.Println(chains.Len(), chains.ContextLen(chains.Len()-1))

	r := rand.New(rand.NewPCG(1, 2))
	random := treetest.Random(r, treetest.Options{Rollouts: 5, PFailed: 0.2})
	fmt.Println(random.Validate())
	// Output:
	// 7 [1 2] [3 4 5]
	// 7 12
	// <nil>
}
