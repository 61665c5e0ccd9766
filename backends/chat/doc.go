// Package chat renders a model's own chat template into a prompt and encodes it to exact
// token ids, the way Hugging Face transformers' apply_chat_template(tokenize=True) does.
//
// A Template is compiled once from the template source (normally tokenizer_config.json's
// chat_template) and rendered with github.com/ardanlabs/jinja under transformers' Jinja2
// settings: trim_blocks and lstrip_blocks on, keep_trailing_newline off (one trailing
// newline of the source is dropped and line endings are normalised to "\n", as Jinja2's
// lexer does), loop controls, raise_exception(msg) failing the render with msg, and
// strftime_now(fmt) formatting the current local time. The template sees messages, tools
// (None when no tools are given), documents (None), add_generation_prompt, the tokenizer's
// special tokens (bos_token, eos_token, ...) and the caller's keyword arguments, which win
// over the special tokens, as in transformers.
//
// Values reach the template in the order they were written: messages, tool schemas and
// tool-call arguments are decoded from JSON into insertion-ordered dicts, so `tools|tojson`
// prints keys in the schema's own order exactly like Python's json.dumps(sort_keys=False)
// with ensure_ascii=False. A plain Go map[string]any given as a keyword argument has no
// order and is rendered with sorted keys; pass json.RawMessage to keep an order.
//
// Known differences from Python that no chat template we test relies on: tojson prints a
// float in Go's shortest form, so an integral float such as 1.0 prints as 1 (Python: 1.0)
// and 1e6 as 1e+06 (Python: 1000000.0); it escapes U+2028 and U+2029 (Python does not);
// and printing None with {{ }} gives "" (Python: "None"). Write integral numbers in tool
// schemas as integers to stay byte-identical.
//
// A Codec pairs a Template with the tokenizer of the same model. The rendered text is
// encoded without the tokenizer's post-processor (no extra BOS/EOS), and special tokens
// written in the text (<|im_start|>, <|im_end|>, ...) become their special ids.
//
// Exact-token continuation: a checkpoint's context is an exact token prefix (prompt ids,
// then generated and conditioning ids). The next request from that checkpoint is that prefix
// unchanged (Continuation), never the decoded text rendered or encoded again: BPE merges
// across a segment boundary and the template's own normalisation (stripped think blocks,
// trimmed whitespace) would give different ids than the ones the policy actually
// conditioned on, and the trainer must see the same tokens the sampler saw.
//
// Concurrency: a compiled Template is immutable and safe for concurrent Render calls. A
// Codec is safe for concurrent use (its tokenizer is); Close releases the tokenizer it owns
// and must not race with other calls.
package chat
