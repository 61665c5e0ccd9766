package tokenizer

// Hooks for the external test package (package tokenizer_test), which may import
// backends/sim: compare the Go decode table with the Rust decode it replaces.

// HasFastDecode reports whether Decode runs in Go for this tokenizer.
func (t *Tokenizer) HasFastDecode() bool { return t.fast != nil }

// DecodeRust is Decode through the Rust library only.
func (t *Tokenizer) DecodeRust(ids []uint32, skipSpecial bool) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.tk.Decode(ids, skipSpecial)
}

// TinyBPE is the small byte-level BPE tokenizer.json of the internal tests; its ids 0-255
// are the 256 single bytes, in byte order.
var TinyBPE = tinyBPE
