// Package sim owns the simulated inference server: the test double for every policy
// backend, the demo's model and the benchmark server. Start serves, on 127.0.0.1 at a free
// port, the real wire formats of SGLang (POST /generate, GET /health, /health_generate,
// /get_model_info (/model_info), /get_server_info (/server_info), /v1/loads (the running
// and waiting counts SGLang's scheduler reports), POST /abort_request,
// /flush_cache), vLLM (POST /v1/completions with token-id prompts, GET /v1/models, /version)
// and OpenAI (POST /v1/chat/completions, /v1/responses), each with its own error envelope.
//
// The model directory holds a generated tokenizer.json (byte-level BPE, GPT-2 byte
// alphabet, Qwen2 pre-tokenizer, a few hundred merges learnt deterministically from the
// simulator's own text), tokenizer_config.json (ChatML specials, eos <|im_end|>, a
// Qwen2.5-style chat template with Hermes tool calls), config.json and
// generation_config.json. Config.TokenizerDir serves another byte-level BPE tokenizer
// instead (e.g. a real Qwen3 checkpoint): the model writes the same text in its vocabulary.
//
// The language model is a probabilistic script over bytes. It finds a bundled problem
// (Problems) in the decoded prompt, and writes a worked solution: an opening line (plain,
// or careful with probability 0.4, which halves later slips), one line per arithmetic step,
// then "Therefore, the answer is \boxed{ANSWER}." and EOS. Each step is wrong with
// probability Problem.Difficulty; a wrong result propagates to the answer unless the very
// next line catches it ("Wait, let me recheck: ...", probability 0.3). So checkpoints
// differ in value: right after a slip the success rate is about 0.3, one line later it is
// zero. A prompt with tools and no tool result in its last user turn gets one
// <tool_call> (the problem's Expression for the tool's first string parameter) instead.
// Text the script cannot continue (foreign assistant text, an unknown raw prompt) makes
// the model wrap up with "\n\nTherefore, the answer is \boxed{...}."; an unknown problem
// in a chat gets a generic computation whose numbers hash from the conversation.
//
// Config.Verbosity (1 to MaxVerbosity) makes solutions as long as a reasoning model's, so
// that 256-token segments cut them several times: the problem restated, each step
// announced and explained, long arithmetic with one line per partial result, a
// double-check after each step (an exact inverse that catches a wrong result, or a rough
// estimate that misses it), an independent verification of the answer and a summary.
// Every arithmetic line can slip, a slip propagates through the values as written, and the
// next line, the step's double-check or the verification may catch it, so a checkpoint's
// value depends on what its prefix holds. Level 3 is the demo level: with the generated
// tokenizer, medians of about 750-1100 tokens (1650 for the four-step averages) and, at
// temperature 1, success from about 0.9 (easiest) to 0.45-0.55 (hardest). verbose.go
// has the details.
//
// At every position the next-token distribution is real: each live script branch
// proposes its longest vocabulary token (mass 0.97) and a shorter tokenisation of the
// same text (0.03), weighted by the branch probabilities; EOS where a branch ends. The
// draw applies temperature (0 = greedy), top-k, top-p and min-p and uses a uniform keyed
// by the request seed (sampling_seed / seed; else Config.Seed + a request counter) and a
// hash of every token before the position. Hence: same seed and request, same tokens;
// a continuation from prompt + generated prefix with the same seed writes exactly what
// the longer request would have (segment boundaries may fall anywhere, even mid-word);
// the parse of a prefix and live generation are one function, so any prefix leads to the
// same state. Reported logprobs are log-probabilities of the sampled token under the
// distribution it was drawn from (Config.LogprobMode "processed", default: after
// temperature and truncation, renormalised) or under the model's own distribution ("raw",
// vLLM V1's default); at temperature 0 both are the raw value. A zero probability (-inf)
// is written as each server writes it: -9999.0 on the vLLM and OpenAI shapes (vLLM's
// clamp), null on SGLang's (its orjson writes -inf and NaN as null).
// Max tokens are never exceeded (except by the extra_tokens fault); EOS, stop_token_ids and
// stop strings end a sequence with the finish reasons and matched values of each API.
//
// Prompt logprobs are the model's raw next-token log-probabilities of each prompt token
// given the tokens before it: SGLang input_token_logprobs / input_top_logprobs from
// logprob_start_len (first entry null), vLLM prompt_logprobs (null first, each position
// the prompt token and the top alternatives with logprob, rank and decoded_token).
// stream=true is served on /generate (cumulative events, SGLang's default), /v1/completions
// and /v1/chat/completions (vLLM's chunk formats, stream_options.include_usage and
// continuous_usage_stats) as server-sent events ending in data: [DONE]; see stream.go.
//
// Not simulated: echo (400), streaming a /generate batch and /v1/responses streaming
// (400), event timing within a stream (the body is sent whole), repetition/frequency/
// presence penalties and logit_bias (accepted, ignored), n>1 top-level expansion on
// /v1/responses.
//
// Concurrency and resources: a Server is safe for concurrent requests and for concurrent
// calls of its methods; SetFaults takes effect for requests that have not yet drawn their
// fault. Latency, queueing and the prefix cache are per server (Config.Latency,
// Config.Cache). Close ends in-flight sequences with finish reason abort, waits for every
// handler and hijacked connection, frees the port and, when it is the last simulator using
// the temporary model directory, removes it; a configured ModelDir is left in place. The tokenizer is generated once per process.
//
// Cost: the server is meant to be a cheap instrument, so that a benchmark at zero latency
// measures its client. Per server it keeps the script branches requests have explored (a
// memo of a pure function, bounded: a full tree is replaced by a fresh one) and the prefix
// cache in pointer-free pages; per request it memoises logs, powers and float formatting,
// and the /generate request and reply are decoded and encoded by hand. None of it changes
// a byte of any reply: testdata/golden.jsonl.gz (replies to varied requests) and
// testdata/model_digest.txt (a digest of the model over every problem and setting) were
// recorded before, and are checked by TestGoldenResponses and TestGoldenModelDigest.
package sim
