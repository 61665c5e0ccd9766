// Package tokenizer wraps Hugging Face tokenizers (the Rust `tokenizers` crate) for exact
// token ids: encode, decode and vocabulary size of a model's own tokenizer.json; finding a
// model's tokenizer files on local disk (Resolve: a directory or the Hugging Face hub cache,
// never a download); and reading the tokenizer_config.json fields that chat rendering needs
// (LoadConfig).
//
// The Rust side is this repository's own small crate, ffi/ (built by the Makefile into
// build/libfocus_tokenizer.a), whose C API passes every text and id array as pointer +
// length in both directions. That is the point of it: a binding that passes NUL-terminated
// C strings truncates a prompt at its first NUL byte ("a\x00b" encoded as "a") and cannot
// return a decoded text that holds one, so the ids trained on would not be the ids the
// model saw. Here a NUL byte is ordinary data: Encode and Decode agree with PyPI's
// tokenizers on every input (tests/test_tokenizer_oracle.py).
//
// Decode is the engine's hot path (every generated segment and every graded rollout), so
// byte-level BPE tokenizers (GPT-2/Qwen: BPE model, ByteLevel decoder) decode in Go from a
// table built at load, byte-for-byte what the Rust library returns and cross-checked
// against it at load; every other tokenizer decodes in Rust.
//
// A Tokenizer is safe for concurrent use: the Rust tokenizer is immutable once loaded and
// its encode/decode take shared references. Close releases the Rust object; using a closed
// Tokenizer returns an error instead of crashing. The Go decode table is immutable. Resolve and LoadConfig only read files; a
// Config is a plain value, safe to share once loaded and not modified.
package tokenizer

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/focus-go/focus-go/core/status"
)

// FileName is the Hugging Face tokenizer file inside a model directory.
const FileName = "tokenizer.json"

// Tokenizer is one loaded tokenizer.json.
type Tokenizer struct {
	mu     sync.RWMutex // guards tk against Close racing with use
	tk     *rustTokenizer
	source string
	vocab  int             // cached: the Rust side builds the whole vocabulary map to count it
	fast   *byteLevelTable // Go-native decode for byte-level BPE files; nil: decode in Rust
}

// Load reads a tokenizer from a tokenizer.json path or from a directory that holds one.
func Load(path string) (*Tokenizer, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		path = filepath.Join(path, FileName)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, status.Wrap(status.NotFound, err, "tokenizer: cannot read %s", path)
	}
	t, err := FromBytes(data)
	if err != nil {
		return nil, err
	}
	t.source = path
	return t, nil
}

// FromBytes parses tokenizer.json content.
func FromBytes(data []byte) (*Tokenizer, error) {
	tk, err := loadRust(data)
	if err != nil {
		return nil, status.Wrap(status.InvalidArgument, err, "tokenizer: cannot parse tokenizer.json")
	}
	t := &Tokenizer{tk: tk, source: "<bytes>", vocab: tk.vocabSize()}
	t.fast = newByteLevelTable(data)
	if t.fast != nil && !t.fastAgrees() {
		t.fast = nil
	}
	return t, nil
}

// fastAgrees cross-checks the byte-level table against Rust before trusting it: the id
// count, every added token alone, and the first and last ids of the vocabulary. The full
// equivalence is what the tests establish; this catches a file that parses the same but
// that Rust reads differently.
func (t *Tokenizer) fastAgrees() bool {
	if t.fast.size != t.vocab {
		return false
	}
	var probe []uint32
	n := uint32(len(t.fast.present))
	for id := uint32(0); id < n; id++ {
		if id < 512 || id+512 >= n || t.fast.special[id] {
			probe = append(probe, id)
		}
	}
	for _, id := range probe {
		for _, skip := range []bool{false, true} {
			one := []uint32{id}
			want, err := t.tk.decode(one, skip)
			if got := t.fast.decode(one, skip); err != nil || got != want {
				return false
			}
		}
	}
	return true
}

// Source is the file the tokenizer was loaded from ("<bytes>" when parsed from memory).
func (t *Tokenizer) Source() string { return t.source }

// Encode turns text into token ids; addSpecial applies the tokenizer's post-processor
// (BOS/EOS templates). Chat prompts are rendered with their special tokens as text, so
// callers normally pass false.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]uint32, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.tk == nil {
		return nil, errClosed
	}
	return t.tk.encode(text, addSpecial)
}

// Decode turns token ids back into text. An id outside the vocabulary is an error (the
// Rust library would silently drop it).
func (t *Tokenizer) Decode(ids []uint32, skipSpecial bool) (string, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.tk == nil {
		return "", errClosed
	}
	for i, id := range ids {
		if int(id) >= t.vocab {
			return "", status.Errorf(status.InvalidArgument, "tokenizer: token %d at position %d is outside the vocabulary (size %d)", id, i, t.vocab)
		}
	}
	if t.fast != nil {
		return t.fast.decode(ids, skipSpecial), nil
	}
	return t.tk.decode(ids, skipSpecial)
}

// VocabSize is the number of ids, added tokens included.
func (t *Tokenizer) VocabSize() int { return t.vocab }

// Close frees the Rust tokenizer. It is safe to call more than once.
func (t *Tokenizer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tk == nil {
		return nil
	}
	t.tk.close()
	t.tk = nil
	return nil
}

var errClosed = status.Errorf(status.InvalidArgument, "tokenizer: used after Close")
