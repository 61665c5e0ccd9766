package transport_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/focus-go/focus-go/backends/transport"
	"github.com/focus-go/focus-go/core/status"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generate" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"The input (43028 tokens) is longer than the model's context length (40960 tokens)."}}`)
			return
		}
		_, _ = io.WriteString(w, `{"version":"0.10.2"}`)
	}))
	defer srv.Close()

	client, err := transport.New(transport.Config{Name: "vllm", BaseURL: srv.URL, MaxConcurrency: 8})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	var version struct{ Version string }
	err = client.Do(context.Background(), transport.Call{Method: "GET", Endpoint: "/version"}, func(body []byte) error {
		return transport.JSON.Unmarshal(body, &version)
	})
	fmt.Println(version.Version, err)

	err = client.Do(context.Background(), transport.Call{Method: "POST", Endpoint: "/generate", Body: map[string]any{"input_ids": []int{1, 2}}},
		func([]byte) error { return nil })
	fmt.Println(status.CodeOf(err), transport.IsContextLength(err))
	fmt.Println(client.Stats().Requests, "requests,", client.Stats().Retries, "retries")
	// Output:
	// 0.10.2 <nil>
	// invalid argument true
	// 2 requests, 0 retries
}
