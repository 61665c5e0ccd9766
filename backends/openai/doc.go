// Package openai owns the Go clients for OpenAI's two chat APIs: Chat Completions
// (POST {base}/chat/completions) and the Responses API (POST {base}/responses). A Client turns
// a conversation (focus-shaped Messages, tool schemas, sampling parameters) into the API's
// request, sends it through backends/transport, and reads the reply into a Result: visible
// text, reasoning, structured tool calls linked by call id, the finish reason mapped to the
// focus stop reasons, per-token logprobs when the server returned them, the raw message or
// output items, and usage counts. It also owns the checks a native conversation must pass
// before it is sent (Validate: tool-call / tool-reply ordering) and the estimated token
// accounting of API models, which have no local tokenizer (EstimateTokens, DecodeEstimate).
//
// Credentials: Config.APIKey is sent only as a bearer token and never appears in an error
// or in a printed Client; Config.WithEnv fills an empty key and base URL from OPENAI_API_KEY
// and OPENAI_BASE_URL. The default base URL is https://api.openai.com/v1; New refuses that
// host without a key (every request would fail with 401), while any other base URL (a local
// vLLM / SGLang OpenAI server) may be keyless. A 401/403 is an InvalidArgument error telling
// the caller to check the key; 429 and 5xx are retried per the transport's RetryPolicy.
//
// Concurrency and resources: a Client is safe for concurrent use; Close releases its idle
// connections and makes later calls fail. Values (Message, Request, Result) are plain data.
package openai
