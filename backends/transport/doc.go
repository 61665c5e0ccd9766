// Package transport owns the HTTP layer that every Go policy backend (SGLang, vLLM) shares:
// one pooled fasthttp connection set per inference server, a per-server limit on requests in
// flight, JSON through json-iterator, deadlines and cancellation from a context.Context,
// bounded retries with exponential backoff and jitter for transient failures only, and
// errors classified with core/status codes that name the server, the endpoint, the HTTP
// status and a snippet of the body.
//
// What is retried: a connection that is refused, reset or closed before any response byte
// arrives; HTTP 429 (honouring Retry-After), 408 (the SGLang router's queue timeout), 500,
// 502, 503 and 504. Nothing else is: a 400 (context length, bad parameters), 401/403, 404,
// a response that started and then broke off, and a body that does not decode are returned
// at once. Retrying a generation re-samples it unless the seed is fixed, so callers must
// treat a retried request as a new sample.
//
// Concurrency and resources: a Client is safe for concurrent use by any number of
// goroutines. At most Config.MaxConcurrency requests are on the wire at once; further calls
// wait for a slot and give up when their context ends. Cancelling a context closes the
// request's connection (inference servers abort the generation when the client disconnects)
// and the call returns at once with status.Cancelled, or status.Timeout when the deadline
// passed. Close releases idle connections; a closed Client refuses new calls. The API key is
// sent only in the Authorization header and never appears in an error message.
package transport
