package rules_test

import (
	"fmt"

	"github.com/focus-go/focus-go/core/rules"
)

func ExampleCheck() {
	config, err := rules.Check(rules.KindIndependent, []byte(`{"n": 8, "seed": 1}`))
	fmt.Printf("%+v %v\n", config, err)
	_, err = rules.Check(rules.KindSelective, []byte(`{"budget": 4, "warmup": 8}`))
	fmt.Println(err)
	d := rules.DefaultValues()
	fmt.Println(d.Selective.Budget, d.Selective.Warmup, d.Segments.Tokens)
	// Output:
	// {Budget:8 Warmup:8 PerPass:4 MaxChildren:4 MinRemaining:0 Score:critic_adaptive Seed:1 Independent:true} <nil>
	// Selective: warmup is 8, must be in [1, budget=4]: warmup (8) must not exceed budget (4)
	// 32 16 256
}
