package tokenizer_test

import (
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/focus-go/focus-go/backends/tokenizer"
	"github.com/focus-go/focus-go/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// qwen3Dir holds a real Qwen3 tokenizer.json when the build has fetched it.
var qwen3Dir = filepath.Join("..", "..", "build", "testdata", "qwen3")

// sampleTexts are real texts: the Go table must agree with Rust on their encodings, every
// prefix of them (prefixes end inside multi-byte characters) and random slices.
var sampleTexts = []string{
	"Let x be the number. Then 3x + 7 = 22, so x = 5 and the answer is \\boxed{5}.",
	"naïve café, Straße, Ελληνικά, русский, עברית, العربية",
	"你好，世界！这是一个测试。日本語のテキストと한국어 텍스트도 있습니다。",
	"emoji 🙂🚀👩‍👩‍👧‍👦 flags 🇯🇵🇫🇷 skin 👍🏽 and ∑∫√∞ ≤ ≥ ≠ ½ ⅓ ℝ ℕ",
	"<|im_start|>user\nSolve 2+2.<|im_end|>\n<|im_start|>assistant\n<think>\nEasy.\n</think>\n\n4<|im_end|><|endoftext|>",
	"tabs\tand  double  spaces\r\nwindows lines\n\n\n   indented ```go\nfunc main() {}\n```",
	"\x01\x02 control bytes \x7f and U+FFFD � itself",
}

// tokenizers returns every tokenizer the fast path must match Rust on, loaded.
func tokenizers(t testing.TB) map[string]*tokenizer.Tokenizer {
	out := map[string]*tokenizer.Tokenizer{}
	tiny, err := tokenizer.FromBytes(tokenizer.TinyBPE(t))
	require.NoError(t, err)
	out["tiny"] = tiny

	srv, err := sim.Start(sim.Config{})
	require.NoError(t, err)
	generated, err := tokenizer.Load(srv.ModelDir())
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	out["sim"] = generated

	if _, err := os.Stat(filepath.Join(qwen3Dir, tokenizer.FileName)); err == nil {
		qwen, err := tokenizer.Load(qwen3Dir)
		require.NoError(t, err)
		out["qwen3"] = qwen
	} else if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the Qwen3 tokenizer is missing at %s: %v", qwen3Dir, err)
	} else {
		t.Logf("skipping the Qwen3 tokenizer: %s is absent", qwen3Dir)
	}
	t.Cleanup(func() {
		for _, tk := range out {
			tk.Close()
		}
	})
	return out
}

func TestFastDecodeMatchesRust(t *testing.T) {
	for name, tk := range tokenizers(t) {
		t.Run(name, func(t *testing.T) {
			require.True(t, tk.HasFastDecode(), "a byte-level BPE tokenizer should decode in Go")
			vocab := tk.VocabSize()
			checks := 0
			same := func(ids []uint32, skip bool) {
				t.Helper()
				got, err := tk.Decode(ids, skip)
				require.NoError(t, err)
				if want := tk.DecodeRust(ids, skip); got != want {
					require.Equal(t, want, got, "ids %v skipSpecial %v", ids, skip)
				}
				checks++
			}

			// Every id alone; collect the ones that are partial UTF-8 (byte tokens) and the
			// added tokens (those whose text changes when specials are skipped).
			var partial, specials []uint32
			for id := 0; id < vocab; id++ {
				one := []uint32{uint32(id)}
				same(one, false)
				same(one, true)
				text := tk.DecodeRust(one, false)
				if strings.ContainsRune(text, utf8.RuneError) {
					partial = append(partial, uint32(id))
				}
				if text != tk.DecodeRust(one, true) {
					specials = append(specials, uint32(id))
				}
			}
			require.NotEmpty(t, partial)
			require.NotEmpty(t, specials)

			// Random sequences mixing any id, byte tokens that split multi-byte characters,
			// and specials between them.
			rng := rand.New(rand.NewSource(1))
			for i := 0; i < 3000; i++ {
				ids := make([]uint32, 1+rng.Intn(48))
				for j := range ids {
					switch r := rng.Intn(10); {
					case r < 4:
						ids[j] = uint32(rng.Intn(vocab))
					case r < 8:
						ids[j] = partial[rng.Intn(len(partial))]
					default:
						ids[j] = specials[rng.Intn(len(specials))]
					}
				}
				same(ids, false)
				same(ids, true)
			}

			// Real texts: whole, every prefix, and random slices.
			for _, text := range sampleTexts {
				ids, err := tk.Encode(text, false)
				require.NoError(t, err)
				got, err := tk.Decode(ids, false)
				require.NoError(t, err)
				assert.Equal(t, text, got, "round trip")
				for k := 0; k <= len(ids); k++ {
					same(ids[:k], false)
					same(ids[:k], true)
				}
				for k := 0; k < 50; k++ {
					a := rng.Intn(len(ids))
					b := a + rng.Intn(len(ids)-a+1)
					same(ids[a:b], rng.Intn(2) == 0)
				}
			}
			t.Logf("%s: %d ids, %d comparisons with Rust, all equal", name, vocab, checks)
		})
	}
}

func TestFastDecodeRandomBytes(t *testing.T) {
	// The tiny tokenizer's ids 0-255 are the single bytes, so a random id string is a
	// random byte string and Rust's decode of it is String::from_utf8_lossy itself.
	tk, err := tokenizer.FromBytes(tokenizer.TinyBPE(t))
	require.NoError(t, err)
	defer tk.Close()
	rng := rand.New(rand.NewSource(2))
	utf8ish := []uint32{0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF, 'a'}
	for i := 0; i < 5000; i++ {
		ids := make([]uint32, 1+rng.Intn(16))
		for j := range ids {
			if rng.Intn(3) == 0 {
				ids[j] = uint32(rng.Intn(256))
			} else {
				ids[j] = utf8ish[rng.Intn(len(utf8ish))]
			}
		}
		got, err := tk.Decode(ids, false)
		require.NoError(t, err)
		require.Equal(t, tk.DecodeRust(ids, false), got, "bytes %x", ids)
	}
}

// benchmarkIDs encodes a long mixed-script solution and cuts it to n tokens.
func benchmarkIDs(b *testing.B, tk *tokenizer.Tokenizer, n int) []uint32 {
	text := strings.Repeat("Step 1: let x be the unknown, so 3x + 7 = 22 and x = 5. 检查：3·5+7=22 ✓ 🙂\n", 200)
	ids, err := tk.Encode(text, false)
	require.NoError(b, err)
	require.GreaterOrEqual(b, len(ids), n)
	return ids[:n]
}

func BenchmarkDecode(b *testing.B) {
	for name, tk := range tokenizers(b) {
		for _, n := range []int{256, 1000} {
			ids := benchmarkIDs(b, tk, n)
			b.Run(name+"/"+itoa(n)+"/go", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := tk.Decode(ids, true); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/"+itoa(n)+"/rust", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					tk.DecodeRust(ids, true)
				}
			})
		}
	}
}

func itoa(n int) string {
	if n == 256 {
		return "segment256"
	}
	return "response1000"
}
