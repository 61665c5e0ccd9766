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
// tool-call arguments are decoded from JSON into insertion-ordered dicts. A plain Go
// map[string]any given as a keyword argument has no order and is rendered with sorted
// keys; pass json.RawMessage to keep an order. Messages are passed through as transformers
// 5 passes message dicts: every key, in order (so custom fields and list content reach the
// template); keys whose value is null are dropped, so a null content is a missing content;
// reasoning given as reasoning_content, thinking or reasoning is seen under both thinking
// and reasoning_content. A role that is neither system, user, assistant nor tool, nor a
// string the template writes in a tag, is refused with an error naming the message
// (transformers would hand it to the template, which usually drops it without a word).
//
// Python semantics. The engine is more lenient than Python Jinja2, so Compile rewrites the
// template before the engine sees it (rewrite.go, expr.go): each tag's expression is
// parsed with Jinja2's grammar and re-emitted with a + b, x in y and `is iterable` as calls
// to functions with Python's rules (str + dict, None + str and a missing value in + raise
// TypeError/UndefinedError as in Python; an undefined value iterates as empty), {{ x }},
// ~ and |string print Python's str() (None, True, 1.0, dict and list repr with Python's
// quoting), tojson is transformers' json.dumps(x, ensure_ascii=False, indent=...,
// separators=..., sort_keys=...) (key order kept, no HTML escaping, U+2028 kept, floats as
// Python's repr: 1.0, 1e-05, 1e+16), map('filter') applies tojson, string, lower, upper
// or trim, and whitespace ({%- -%}, {%+, lstrip_blocks, trim_blocks, comments, raw
// blocks) is handled in the source exactly as Jinja2's lexer does, because the engine's own
// trimming reaches across {{ }} tags and loses indentation Jinja2 keeps. A render error names the message it arises at (the shortest failing prefix of the
// conversation) and quotes the expression.
//
// Known differences from Python that remain: `d.items` (and keys, values, get) on a dict
// that has such a key gives the key's value (Python gives the method); integers beyond
// int64 become floats; join, trim and other built-in filters print their non-string items
// the engine's way; other operators (-, *, comparisons) keep the engine's lenient rules.
// tests/test_chat_oracle.py compares every family's template with transformers (and any
// vendor template put in FOCUS_CHAT_TEMPLATES_DIR).
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
