package binding_test

import (
	"fmt"

	"github.com/focus-go/focus-go/capi/binding"
)

func ExampleCheck() {
	config, err := binding.Check(binding.KindIndependent, []byte(`{"n": 8, "seed": 1}`))
	fmt.Printf("%+v %v\n", config, err)
	_, err = binding.Check(binding.KindSelective, []byte(`{"budget": 4, "warmup": 8}`))
	fmt.Println(err)
	d := binding.DefaultValues()
	fmt.Println(d.Selective.Budget, d.Selective.Warmup, d.Segments.Tokens)
	// Output:
	// {Budget:8 Warmup:8 PerPass:4 MaxChildren:4 MinRemaining:0 Score:value_refinement_per_token Seed:1 StopAlike:false Independent:true} <nil>
	// Selective: warmup is 8, must be in [1, budget=4]: warmup (8) must not exceed budget (4)
	// 8 4 256
}

func ExampleDecode() {
	var grade binding.GradeRequest
	err := binding.Decode("math grade request", []byte(`{"text": "\\boxed{4}", "label": "4"}`), &grade)
	fmt.Println(grade.Label, err)
	err = binding.Decode("math grade request", []byte(`{"text": "\\boxed{4}", "lable": "4"}`), &grade)
	fmt.Println(err)
	// Output:
	// 4 <nil>
	// math grade request: unknown key "lable", did you mean "label"? (allowed: label, text)
}
