package export_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/prepare"
	"github.com/focus-go/focus-go/core/tree/treetest"
)

func Example() {
	t := treetest.Figure61()
	batch, err := prepare.Prepare(t, prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	if err != nil {
		panic(err)
	}
	fmt.Print(export.FormatTree(t, batch))

	flat, err := export.Encode(batch, 0, export.Options{MinAbsAdvantage: 0.2})
	if err != nil {
		panic(err)
	}
	fmt.Println(flat.NumActor(), "actor records,", flat.NumCritic(), "critic records")
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, r := range flat.Records() {
		if err := enc.Encode(r); err != nil {
			panic(err)
		}
	}
	// Output:
	// 0 root v_hat=0.5 target=0.5625 "s"
	// ├── 1 r=0 v_hat=0.5 A=+0.333333 target=1 "a"
	// │   ├── 3 done r=1 A=+0.125 "+"
	// │   ├── 4 done r=1 A=+0.125 "+"
	// │   └── 5 done r=1 A=+0.125 "+"
	// └── 2 r=0 v_hat=0.5 A=-0.291667 target=0 "b"
	//     └── 6 done r=0 A=-0.25 "-"
	// 3 actor records, 3 critic records
	// {"tokens":[1,2,3,10,11],"loss_mask":[false,false,false,true,true],"behavior_logprobs":[0,0,0,-0.25,-0.5],"advantage":0.33333333333333337,"lane":"actor","group_index":0,"estimator":"DirectBranchTd","node_id":1,"search_pass":0,"problem_id":"fig61","response_start":3,"response_text":null,"return":0,"finished":false,"off_policy_tokens":0,"weight_versions":[]}
	// {"tokens":[1,2,3,20],"loss_mask":[false,false,false,true],"behavior_logprobs":[0,0,0,-0.25],"advantage":-0.29166666666666663,"lane":"actor","group_index":0,"estimator":"DirectBranchTd","node_id":2,"search_pass":0,"problem_id":"fig61","response_start":3,"response_text":null,"return":0,"finished":false,"off_policy_tokens":0,"weight_versions":[]}
	// {"tokens":[1,2,3,20,40],"loss_mask":[false,false,false,false,true],"behavior_logprobs":[0,0,0,0,-0.25],"advantage":-0.25,"lane":"actor","group_index":0,"estimator":"DirectBranchTd","node_id":6,"search_pass":0,"problem_id":"fig61","response_start":4,"response_text":null,"return":0,"finished":true,"off_policy_tokens":0,"weight_versions":[]}
	// {"context":"s","target":0.5625,"lane":"critic","group_index":0,"node_id":0,"problem_id":"fig61"}
	// {"context":"sa","target":1,"lane":"critic","group_index":0,"node_id":1,"problem_id":"fig61"}
	// {"context":"sb","target":0,"lane":"critic","group_index":0,"node_id":2,"problem_id":"fig61"}
}

// The path layout: one record per leaf path, each trained token masked once with
// its own edge's advantage in Advantages.
func ExampleOptions_paths() {
	batch, err := prepare.Prepare(treetest.Figure61(), prepare.DefaultRewardConfig(), prepare.DirectBranchTd{})
	if err != nil {
		panic(err)
	}
	flat, err := export.Encode(batch, 0, export.Options{Layout: export.LayoutPaths})
	if err != nil {
		panic(err)
	}
	for i := range flat.NumActor() {
		r := flat.PathRecord(i)
		fmt.Println(r.NodeID, r.Tokens, r.LossMask, r.Advantages)
	}
	// Output:
	// 3 [1 2 3 10 11 30] [false false false true true true] [0 0 0 0.33333333333333337 0.33333333333333337 0.125]
	// 4 [1 2 3 10 11 30] [false false false false false true] [0 0 0 0 0 0.125]
	// 5 [1 2 3 10 11 30] [false false false false false true] [0 0 0 0 0 0.125]
	// 6 [1 2 3 20 40] [false false false true true] [0 0 0 -0.29166666666666663 -0.25]
}
