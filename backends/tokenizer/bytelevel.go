package tokenizer

import (
	"unicode/utf8"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
)

// byteLevelTable is a Go-native decoder for byte-level BPE tokenizers (GPT-2, Qwen): every
// id's output bytes, precomputed at load. Decode is then a table walk plus UTF-8 repair,
// with no cgo call; profiling showed the cgo decode at ~43% of the collection engine's CPU.
// It is built only when the tokenizer.json is in the shape whose decode it reproduces
// exactly (see newByteLevelTable), and it is immutable, so it is safe for concurrent use.
type byteLevelTable struct {
	data    []byte   // all token bytes, concatenated
	offsets []uint32 // id i's bytes are data[offsets[i]:offsets[i+1]]
	present []bool   // id i has a token (vocabulary or added); absent ids are skipped
	special []bool   // id i's token is the content of a special added token
	size    int      // number of ids with a token: the Rust VocabSize
}

// tokenizerFile is the part of tokenizer.json the byte-level table depends on.
type tokenizerFile struct {
	AddedTokens []struct {
		ID      uint32 `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Decoder *decoderSpec `json:"decoder"`
	Model   struct {
		Type         string            `json:"type"`
		Vocab        map[string]uint32 `json:"vocab"`
		ByteFallback bool              `json:"byte_fallback"`
	} `json:"model"`
}

type decoderSpec struct {
	Type     string        `json:"type"`
	Decoders []decoderSpec `json:"decoders"`
}

// isByteLevel accepts a ByteLevel decoder alone or as the only member of a Sequence; a
// Sequence applies its decoders one after another, so any other member changes the output.
func (d *decoderSpec) isByteLevel() bool {
	if d == nil {
		return false
	}
	if d.Type == "Sequence" {
		return len(d.Decoders) == 1 && d.Decoders[0].Type == "ByteLevel"
	}
	return d.Type == "ByteLevel"
}

// byteOfRune inverts GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for
// themselves, the other 68 bytes for U+0100.. in byte order.
var byteOfRune = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[rune(b)] = byte(b)
		} else {
			m[next] = byte(b)
			next++
		}
	}
	return m
}()

// byteLevelBytes is what the Rust ByteLevel decoder makes of one token string: the byte
// of every rune when all runes are in the byte alphabet, otherwise the string's own UTF-8
// bytes unchanged (this is how added tokens such as "<|im_end|>" or " " pass through).
func byteLevelBytes(dst []byte, token string) []byte {
	start := len(dst)
	for _, r := range token {
		b, ok := byteOfRune[r]
		if !ok {
			return append(dst[:start], token...)
		}
		dst = append(dst, b)
	}
	return dst
}

// newByteLevelTable builds the table for data, or returns nil when the file is outside
// what it reproduces exactly; the caller then keeps decoding through Rust. It mirrors
// the tokenizers crate ffi/ links (see ffi/Cargo.toml): decode maps each id through the added vocabulary, then the model's
// vocabulary, drops unknown ids, drops tokens whose text is a special added token's when
// skipping specials, and runs the decoder over the token strings.
func newByteLevelTable(data []byte) *byteLevelTable {
	var f tokenizerFile
	if err := jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal(data, &f); err != nil {
		return nil
	}
	if f.Model.Type != "BPE" || f.Model.ByteFallback || !f.Decoder.isByteLevel() {
		return nil
	}
	tokens := map[uint32]string{}
	maxID := uint32(0)
	for s, id := range f.Model.Vocab {
		if _, dup := tokens[id]; dup {
			return nil // Rust's reverse map would pick one of them arbitrarily
		}
		tokens[id] = s
		if id > maxID {
			maxID = id
		}
	}
	// Added tokens get their ids as AddedVocabulary::add_tokens assigns them: the model's id
	// when the content is in the vocabulary, else one past the highest added id (or the
	// vocabulary size). A file whose listed ids disagree, or with empty or repeated
	// contents, goes through Rust.
	specials := map[string]bool{}
	seen := map[string]bool{}
	modelSize := uint32(len(f.Model.Vocab))
	var maxAdded uint32
	haveAdded := false
	for _, a := range f.AddedTokens {
		if a.Content == "" || seen[a.Content] {
			return nil
		}
		seen[a.Content] = true
		id, inVocab := f.Model.Vocab[a.Content]
		if !inVocab {
			id = modelSize
			if haveAdded && (maxAdded >= modelSize || modelSize == 0) {
				id = maxAdded + 1
			}
		}
		if id != a.ID {
			return nil
		}
		if !haveAdded || id > maxAdded {
			maxAdded, haveAdded = id, true
		}
		tokens[id] = a.Content
		if id > maxID {
			maxID = id
		}
		if a.Special {
			specials[a.Content] = true
		}
	}
	if len(tokens) == 0 {
		return nil
	}
	n := int(maxID) + 1
	t := &byteLevelTable{offsets: make([]uint32, n+1), present: make([]bool, n), special: make([]bool, n), size: len(tokens)}
	for id := 0; id < n; id++ {
		if s, ok := tokens[uint32(id)]; ok {
			t.data = byteLevelBytes(t.data, s)
			t.present[id] = true
			t.special[id] = specials[s]
		}
		t.offsets[id+1] = uint32(len(t.data))
	}
	return t
}

// decode concatenates the ids' bytes and repairs invalid UTF-8 as Rust's
// String::from_utf8_lossy does. Ids must already be checked against the vocabulary size.
func (t *byteLevelTable) decode(ids []uint32, skipSpecial bool) string {
	n := 0
	for _, id := range ids {
		if int(id) < len(t.present) {
			n += int(t.offsets[id+1] - t.offsets[id])
		}
	}
	buf := make([]byte, 0, n)
	for _, id := range ids {
		if int(id) >= len(t.present) || !t.present[id] || (skipSpecial && t.special[id]) {
			continue
		}
		buf = append(buf, t.data[t.offsets[id]:t.offsets[id+1]]...)
	}
	if len(buf) == 0 {
		return ""
	}
	if utf8.Valid(buf) {
		// buf is ours alone and never written again, so it can back the string directly.
		return unsafe.String(&buf[0], len(buf))
	}
	return fromUTF8Lossy(buf)
}

// fromUTF8Lossy is Rust's String::from_utf8_lossy: each maximal prefix of a valid UTF-8
// sequence that cannot be completed (or a lone bad byte) becomes one U+FFFD. Go's
// strings.ToValidUTF8 instead merges whole runs of bad bytes into one replacement.
func fromUTF8Lossy(b []byte) string {
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		// The sequence length and the allowed range of the second byte follow the UTF-8
		// well-formedness table (no overlongs, no surrogates, nothing above U+10FFFF).
		var size int
		lo, hi := byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			size = 2
		case c == 0xE0:
			size, lo = 3, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			size = 3
		case c == 0xED:
			size, hi = 3, 0x9F
		case c == 0xF0:
			size, lo = 4, 0x90
		case c >= 0xF1 && c <= 0xF3:
			size = 4
		case c == 0xF4:
			size, hi = 4, 0x8F
		default:
			out = append(out, "\uFFFD"...)
			i++
			continue
		}
		k := 1 // bytes of the sequence that are valid so far
		for k < size && i+k < len(b) {
			x := b[i+k]
			if k == 1 && (x < lo || x > hi) || k > 1 && (x < 0x80 || x > 0xBF) {
				break
			}
			k++
		}
		if k == size {
			out = append(out, b[i:i+size]...)
		} else {
			out = append(out, "\uFFFD"...)
		}
		i += k
	}
	return string(out)
}
