package tokenizer

// Hooks for the external test package (package tokenizer_test), which may import
// sim: compare the Go decode table with the Rust decode it replaces.

// HasFastDecode reports whether Decode runs in Go for this tokenizer.
func (t *Tokenizer) HasFastDecode() bool { return t.fast != nil }

// DecodeRust is Decode through the Rust library only (an error becomes its message, which
// no comparison with a decoded text mistakes for one).
func (t *Tokenizer) DecodeRust(ids []uint32, skipSpecial bool) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	text, err := t.tk.decode(ids, skipSpecial)
	if err != nil {
		return "<DecodeRust error: " + err.Error() + ">"
	}
	return text
}

// TinyBPE is the small byte-level BPE tokenizer.json of the internal tests; its ids 0-255
// are the 256 single bytes, in byte order.
var TinyBPE = tinyBPE
