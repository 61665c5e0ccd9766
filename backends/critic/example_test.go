package critic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/focus-go/focus-go/backends/critic"
	"github.com/focus-go/focus-go/core/status"
)

func Example() {
	// A value server that predicts 0.25 for short contexts and 0.75 for long ones.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) == `{"contexts":["2+2=","2+2=4, so"]}` {
			_, _ = io.WriteString(w, `{"values": [0.25, 0.75]}`)
			return
		}
		_, _ = io.WriteString(w, `{"values": [0.5]}`)
	}))
	defer srv.Close()

	c, err := critic.HTTP(srv.URL+"/value", 0)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	values, err := c.Score(context.Background(), []string{"2+2=", "2+2=4, so"})
	fmt.Println(values, err)
	_, err = c.Score(context.Background(), []string{"a", "b"})
	fmt.Println(status.CodeOf(err), "error:", strings.ReplaceAll(err.Error(), srv.URL, "http://server"))

	// Output:
	// [0.25 0.75] <nil>
	// backend error: critic: http://server/value: returned 1 values for 2 contexts; expected one value per context
}
