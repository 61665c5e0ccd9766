package bridge_test

import (
	"context"
	"fmt"

	"github.com/focus-go/focus-go/core/bridge"
)

func Example() {
	b := bridge.New()
	defer b.Close()

	// The Python driver's worker thread: poll, serve, resolve by id.
	go func() {
		for {
			req, err := b.Poll(context.Background())
			if err != nil {
				return // closed
			}
			fmt.Printf("python got %s for object %d: %s\n", req.Kind, req.Object, req.Payload)
			_ = b.Resolve(req.ID, []byte(`{"values": [0.25, 0.75]}`))
		}
	}()

	// The engine's side: a Python critic function registered as object 7.
	values, err := bridge.Critic{Bridge: b, Object: 7}.Score(context.Background(), []string{"2+2=", "2+2=4"})
	fmt.Println(values, err)
	// Output:
	// python got critic.score for object 7: {"contexts":["2+2=","2+2=4"]}
	// [0.25 0.75] <nil>
}
